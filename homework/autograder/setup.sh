#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image. Its default image is
# Ubuntu 22.04, whose python3 is 3.10; minitensor needs 3.11 or newer, so bring one when missing.
# Two environments: the grader's (PyTorch, pytest), readable by root alone, and the one student code
# runs in (no PyTorch at all), readable by every user, since student code runs as a user of its own.
# bubblewrap isolates the workers where the image allows namespaces (Landlock where it does not).
# MINITENSOR_SETUP_DRY_RUN=1 prints the commands instead.
set -euo pipefail
SOURCE="$(cd "$(dirname "$0")" && pwd)"
PREFIX="${MINITENSOR_PREFIX:-/opt/minitensor}"
run() {
    if [ "${MINITENSOR_SETUP_DRY_RUN:-0}" = 1 ]; then echo "+ $*"; else "$@"; fi
}

# The newest Python >= 3.11 on PATH, or nothing.
find_python() {
    for candidate in python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 \
                && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$candidate"
            return
        fi
    done
}

export DEBIAN_FRONTEND=noninteractive
run apt-get update
run apt-get install -y bubblewrap || echo "bubblewrap is not available: workers are isolated by Landlock"
PYTHON="$(find_python)"
if [ -z "$PYTHON" ]; then
    echo "no Python >= 3.11 on this image ($(python3 --version 2>&1 || echo 'no python3')): installing python3.11"
    run apt-get install -y software-properties-common
    run add-apt-repository -y ppa:deadsnakes/ppa
    run apt-get update
    run apt-get install -y python3.11 python3.11-venv
    PYTHON=python3.11
else
    run apt-get install -y python3-venv || true  # Debian and Ubuntu ship venv apart
fi
echo "using $PYTHON"
run "$PYTHON" -m venv "$PREFIX/grader"
run "$PYTHON" -m venv "$PREFIX/student"
# PyTorch's CPU wheel from its own index (PyPI's Linux wheel is the multi-GB CUDA build), then the rest.
run "$PREFIX/grader/bin/pip" install --index-url https://download.pytorch.org/whl/cpu "$(grep '^torch==' "$SOURCE/requirements-grader.txt")"
run "$PREFIX/grader/bin/pip" install -r "$SOURCE/requirements-grader.txt"
run "$PREFIX/student/bin/pip" install -r "$SOURCE/requirements-student.txt"
run chmod 755 "$PREFIX"
run chmod -R a+rX "$PREFIX/student"
run chmod -R go-rwx "$PREFIX/grader"
