"""CuPy backend: an accelerator on an NVIDIA GPU. Imported only when chosen.

    pip install cupy-cuda12x
    mt.set_backend("cupy"); x = mt.randn(4, 8).to("cupy")

Softmax and layer norm are CUDA kernels with one thread block per row (a
shared-memory reduction for the max and the sum, then the normalisation);
GELU is an ElementwiseKernel; matmul is cupy.matmul (cuBLAS). Log-softmax and
the tiled attention have no kernel here: their ops' own code runs on CuPy arrays
unchanged (every tile's products go through cuBLAS).
"""

try:
    import cupy
except ImportError as error:  # pragma: no cover - depends on the machine
    raise ImportError(
        "the cupy backend needs CuPy and an NVIDIA GPU; install CuPy for CUDA 12 with "
        "`pip install cupy-cuda12x`, or choose mt.set_backend('numba') on a CPU"
    ) from error

try:
    _gpus = cupy.cuda.runtime.getDeviceCount()
except cupy.cuda.runtime.CUDARuntimeError:
    _gpus = 0
if _gpus == 0:
    raise ImportError(
        "the cupy backend found no NVIDIA GPU (cupy is installed, but CUDA sees no device); "
        "choose mt.set_backend('numba') or 'numpy' on a CPU"
    )

import re  # noqa: E402

from .conventions import common_dtype  # noqa: E402

xp = cupy
name = "cupy"
THREADS = 256  # threads per block (per row) in the row kernels

_ROW_KERNELS = r"""
#define THREADS 256

__device__ double block_max(double value, double* buffer) {
    buffer[threadIdx.x] = value;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buffer[threadIdx.x] = fmax(buffer[threadIdx.x], buffer[threadIdx.x + s]);
        __syncthreads();
    }
    double result = buffer[0];
    __syncthreads();
    return result;
}

__device__ double block_sum(double value, double* buffer) {
    buffer[threadIdx.x] = value;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buffer[threadIdx.x] += buffer[threadIdx.x + s];
        __syncthreads();
    }
    double result = buffer[0];
    __syncthreads();
    return result;
}

template <typename T>
__global__ void softmax_rows(const T* x, const bool* hidden, int use_mask, T* y, int cols) {
    __shared__ double buffer[THREADS];
    const size_t start = (size_t)blockIdx.x * cols;
    double row_max = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += THREADS)
        if (!(use_mask && hidden[start + c])) row_max = fmax(row_max, (double)x[start + c]);
    row_max = block_max(row_max, buffer);
    double total = 0.0;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        bool hide = (use_mask && hidden[start + c]) || row_max == -INFINITY;
        double e = hide ? 0.0 : exp((double)x[start + c] - row_max);
        y[start + c] = (T)e;
        total += e;
    }
    total = block_sum(total, buffer);
    double inverse = total > 0.0 ? 1.0 / total : 0.0;  // a fully hidden row stays zeros
    for (int c = threadIdx.x; c < cols; c += THREADS) y[start + c] = (T)((double)y[start + c] * inverse);
}


template <typename T>
__global__ void layer_norm_rows(const T* x, const T* weight, const T* bias, int affine, double eps,
                                T* y, T* mean, T* rstd, int cols) {
    __shared__ double buffer[THREADS];
    const size_t start = (size_t)blockIdx.x * cols;
    double total = 0.0;
    for (int c = threadIdx.x; c < cols; c += THREADS) total += (double)x[start + c];
    double row_mean = block_sum(total, buffer) / cols;
    double squares = 0.0;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        double d = (double)x[start + c] - row_mean;
        squares += d * d;
    }
    double row_rstd = rsqrt(block_sum(squares, buffer) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        double value = ((double)x[start + c] - row_mean) * row_rstd;
        if (affine) value = value * (double)weight[c] + (double)bias[c];
        y[start + c] = (T)value;
    }
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = (T)row_mean;
        rstd[blockIdx.x] = (T)row_rstd;
    }
}

"""

# BEGIN SOLUTION softmax_backward
_ROW_KERNELS += r"""
template <typename T>
__global__ void softmax_backward_rows(const T* y, const T* dy, T* dx, int cols) {
    __shared__ double buffer[THREADS];
    const size_t start = (size_t)blockIdx.x * cols;
    double dot = 0.0;
    for (int c = threadIdx.x; c < cols; c += THREADS) dot += (double)dy[start + c] * (double)y[start + c];
    dot = block_sum(dot, buffer);
    for (int c = threadIdx.x; c < cols; c += THREADS)
        dx[start + c] = (T)((double)y[start + c] * ((double)dy[start + c] - dot));
}
"""
# END SOLUTION

# BEGIN SOLUTION layer_norm_backward
_ROW_KERNELS += r"""
template <typename T>
__global__ void layer_norm_backward_rows(const T* dy, const T* x, const T* weight, int affine,
                                         const T* mean, const T* rstd, T* dx, int cols) {
    __shared__ double buffer[THREADS];
    const size_t start = (size_t)blockIdx.x * cols;
    const double m = (double)mean[blockIdx.x], r = (double)rstd[blockIdx.x];
    double g_sum = 0.0, g_xhat_sum = 0.0;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        double x_hat = ((double)x[start + c] - m) * r;
        double g = affine ? (double)dy[start + c] * (double)weight[c] : (double)dy[start + c];
        g_sum += g;
        g_xhat_sum += g * x_hat;
    }
    double g_mean = block_sum(g_sum, buffer) / cols;
    double g_xhat_mean = block_sum(g_xhat_sum, buffer) / cols;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        double x_hat = ((double)x[start + c] - m) * r;
        double g = affine ? (double)dy[start + c] * (double)weight[c] : (double)dy[start + c];
        dx[start + c] = (T)(r * (g - g_mean - x_hat * g_xhat_mean));
    }
}
"""
# END SOLUTION

# every kernel the source defines (a student copy lacks the backward ones of unsolved tasks)
_KERNEL_NAMES = [
    f"{kernel}<{ctype}>"
    for kernel in re.findall(r"__global__ void (\w+)", _ROW_KERNELS)
    for ctype in ("float", "double")
]
_module = cupy.RawModule(code=_ROW_KERNELS, options=("-std=c++14",), name_expressions=_KERNEL_NAMES)
_CTYPES = {cupy.dtype(cupy.float32): "float", cupy.dtype(cupy.float64): "double"}


def _kernel(name, dtype):
    if dtype not in _CTYPES:
        raise TypeError(f"cupy backend: {name} supports float32 and float64, got {dtype}")
    return _module.get_function(f"{name}<{_CTYPES[dtype]}>")


def _rows(x, axis):
    moved = cupy.moveaxis(x, axis, -1)
    return cupy.ascontiguousarray(moved).reshape(-1, moved.shape[-1]), moved.shape


def _unrows(rows, moved_shape, axis):
    return cupy.moveaxis(rows.reshape(moved_shape), -1, axis)


def matmul(a, b):
    return cupy.matmul(a, b)


def softmax(x, axis=-1, mask=None):
    rows, moved_shape = _rows(x, axis)
    if rows.size == 0:
        return x.copy()
    if mask is None:
        hidden, use_mask = cupy.zeros(1, dtype=cupy.bool_), 0
    else:
        hidden, _ = _rows(cupy.broadcast_to(cupy.asarray(mask), x.shape), axis)
        use_mask = 1
    y = cupy.empty_like(rows)
    _kernel("softmax_rows", x.dtype)(
        (rows.shape[0],), (THREADS,), (rows, hidden, cupy.int32(use_mask), y, cupy.int32(rows.shape[1]))
    )
    return _unrows(y, moved_shape, axis)


# BEGIN SOLUTION softmax_backward
def softmax_backward(y, dy, axis=-1):
    y_rows, moved_shape = _rows(y, axis)
    if y_rows.size == 0:
        return dy.copy()
    dy_rows, _ = _rows(dy.astype(y.dtype, copy=False), axis)
    dx = cupy.empty_like(y_rows)
    _kernel("softmax_backward_rows", y.dtype)(
        (y_rows.shape[0],), (THREADS,), (y_rows, dy_rows, dx, cupy.int32(y_rows.shape[1]))
    )
    return _unrows(dx, moved_shape, axis)
# END SOLUTION


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    dtype = common_dtype(x, weight, bias)  # mixed dtypes: the ops' rule
    rows = cupy.ascontiguousarray(x, dtype=dtype).reshape(-1, x.shape[-1])
    affine = weight is not None
    w = cupy.ascontiguousarray(weight, dtype=dtype) if affine else cupy.zeros(1, dtype=dtype)
    b = cupy.ascontiguousarray(bias, dtype=dtype) if bias is not None else cupy.zeros_like(w)
    y = cupy.empty_like(rows)
    mean = cupy.empty(rows.shape[0], dtype=dtype)
    rstd = cupy.empty(rows.shape[0], dtype=dtype)
    if rows.size:
        _kernel("layer_norm_rows", dtype)(
            (rows.shape[0],), (THREADS,),
            (rows, w, b, cupy.int32(affine), cupy.float64(eps), y, mean, rstd, cupy.int32(rows.shape[1])),
        )
    stats_shape = x.shape[:-1] + (1,)
    return y.reshape(x.shape), mean.reshape(stats_shape), rstd.reshape(stats_shape)


# BEGIN SOLUTION layer_norm_backward
def layer_norm_backward(dy, x, weight, mean, rstd):
    dtype = common_dtype(x, weight, mean)
    rows = cupy.ascontiguousarray(x, dtype=dtype).reshape(-1, x.shape[-1])
    dy_rows = cupy.ascontiguousarray(dy, dtype=dtype).reshape(rows.shape)
    affine = weight is not None
    w = cupy.ascontiguousarray(weight, dtype=dtype) if affine else cupy.zeros(1, dtype=dtype)
    mean_rows = cupy.ascontiguousarray(mean, dtype=dtype).reshape(-1)
    rstd_rows = cupy.ascontiguousarray(rstd, dtype=dtype).reshape(-1)
    dx = cupy.empty_like(rows)
    if rows.size:
        _kernel("layer_norm_backward_rows", dtype)(
            (rows.shape[0],), (THREADS,),
            (dy_rows, rows, w, cupy.int32(affine), mean_rows, rstd_rows, dx, cupy.int32(rows.shape[1])),
        )
    if not affine:
        return dx.reshape(x.shape), None, None
    x_hat = (rows - mean_rows[:, None]) * rstd_rows[:, None]
    return dx.reshape(x.shape), (dy_rows * x_hat).sum(axis=0), dy_rows.sum(axis=0)
# END SOLUTION


_gelu_exact = cupy.ElementwiseKernel("T x", "T y", "y = 0.5 * x * (1 + erf(x * 0.7071067811865476))", "mt_gelu_exact")
# The tanh form 0.5 x (1 + tanh u) is computed as x * sigmoid(2u) = x / (1 + exp(-2u)), as in the
# op's own code and the Numba kernels: 1 + tanh u cancels to nothing in float32 for x < -5.
_gelu_tanh = cupy.ElementwiseKernel(
    "T x", "T y", "y = x / (1 + exp(-2 * 0.7978845608028654 * (x + 0.044715 * x * x * x)))", "mt_gelu_tanh"
)
_gelu_exact_backward = cupy.ElementwiseKernel(
    "T x, T dy", "T dx",
    "dx = dy * (0.5 * (1 + erf(x * 0.7071067811865476)) + x * exp(-0.5 * x * x) * 0.3989422804014327)",
    "mt_gelu_exact_backward",
)
_gelu_tanh_backward = cupy.ElementwiseKernel(
    "T x, T dy", "T dx",
    # d/dx [x s] = s + 2 x s' du/dx with s = sigmoid(2u) = 1 / (1 + e), e = exp(-2u), and
    # s' = s (1 - s) = s (e s): no cancellation in 1 - s. Where e overflows to inf, s = 0 and
    # s' = 0 (not inf * 0), as in the Numba kernel; capping -2u at 80 instead gave float64
    # x = -1e30 a derivative of -3.9e54.
    """T e = exp(-2 * 0.7978845608028654 * (x + 0.044715 * x * x * x));
       T s = 1 / (1 + e);
       T s_prime = isinf(e) ? (T)0 : s * (e * s);
       T du = 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
       dx = dy * (s + 2 * x * s_prime * du)""",
    "mt_gelu_tanh_backward",
)


def gelu(x, approximate="none"):
    return _gelu_tanh(x) if approximate == "tanh" else _gelu_exact(x)


def gelu_backward(x, dy, approximate="none"):
    dy = dy.astype(x.dtype, copy=False)
    return _gelu_tanh_backward(x, dy) if approximate == "tanh" else _gelu_exact_backward(x, dy)
