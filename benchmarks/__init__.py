"""Side-by-side timings that print ratios (minitensor against PyTorch). Run: python -m benchmarks"""
