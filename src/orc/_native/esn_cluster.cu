// orc's closed-loop ESN forecast on an NVIDIA GPU of compute capability 9.0
// or later (Hopper, Blackwell): the whole forecast in ONE thread-block
// cluster. Compiled at first use by NVRTC (orc._native's CUDA handler; the
// source is embedded in the extension at build time, so no compiler is
// needed at install) with DTYPE (float/double), COLT (the column index type),
// ROWLANES (threads per row) and CLUSTER (blocks) defined.
//
// Same function as orc._matrix._esn_forecast_scan, the sums in another order:
//   y_t = concat_c(wout[c] @ r_t[c]),  t = 0 .. length-1,
//   r_{t+1}[c] = leak tanh(W_c r_t[c] + win[c] @ y_t[window[c]] + bias[c])
//                + (1 - leak) r_t[c].
// Deterministic: every sum runs in a fixed order, no floating-point atomics.
typedef DTYPE T;
typedef COLT Col;  // a column index: unsigned short where the state has < 65536 nodes
#define MAXOUT 8
static_assert(ROWLANES >= 1 && ROWLANES <= 32 && (ROWLANES & (ROWLANES - 1)) == 0,
              "ROWLANES (threads per row) must be a power of two up to 32");
static_assert(CLUSTER >= 1 && CLUSTER <= 16, "a cluster holds 1 to 16 blocks");

__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// the sum over a group of ROWLANES lanes, in every lane of the group (a
// butterfly: a + b == b + a, so every lane holds the same bits)
__device__ __forceinline__ T group_allsum(T v) {
#pragma unroll
    for (int off = ROWLANES / 2; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off, ROWLANES);
    return v;
}

__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// every thread of every block of the cluster: the blocks' shared-memory
// writes before it are visible to all of them after it (release/acquire)
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// store v at `local`'s place in the shared memory of block `rank` of the cluster
__device__ __forceinline__ void store_in(const void* local, unsigned rank, double v) {
    unsigned a = (unsigned)__cvta_generic_to_shared(local), remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(a), "r"(rank));
    asm volatile("st.shared::cluster.f64 [%0], %1;" :: "r"(remote), "d"(v) : "memory");
}
__device__ __forceinline__ void store_in(const void* local, unsigned rank, float v) {
    unsigned a = (unsigned)__cvta_generic_to_shared(local), remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(a), "r"(rank));
    asm volatile("st.shared::cluster.f32 [%0], %1;" :: "r"(remote), "f"(v) : "memory");
}

// Each block of the one cluster owns R = ceil(C n / CLUSTER) rows: their
// values, columns, input weights, bias and readout weights stay in its shared
// memory for the whole forecast, next to a full copy of the state (two
// buffers) and every block's share of the readout (two buffers). A step:
// the readout y_t as the sum of the blocks' shares in block order (the same
// bits in every block), the block's rows of r_{t+1}, each stored into every
// block's copy of the state (distributed shared memory), the block's share of
// y_{t+1} stored likewise, then the cluster's hardware barrier. Nothing goes
// through global memory but y. mode 1: the barrier alone, `length` times.
extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) esn_forecast_cluster(
    const T* __restrict__ values,   // (C n, k)
    const int* __restrict__ cols,   // (C n, k), columns within the row's chunk
    const T* __restrict__ win,      // (C n, w)
    const int* __restrict__ window, // (C, w), positions in y
    const T* __restrict__ wout,     // (C o, n)
    const T* __restrict__ bias,     // (C n)
    const T* __restrict__ leak_p,   // the leak rate (a scalar)
    const T* __restrict__ r0,       // (C n)
    T* y_out,                       // (length, C o)
    int C, int n, int k, int w, int o, int length, int mode) {
    const unsigned rank = cluster_rank();
    const int total = C * n, outs = C * o;
    const int R = (total + CLUSTER - 1) / CLUSTER;
    const int first = (int)rank * R;
    const int mine = max(0, min(R, total - first));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int per_warp = 32 / ROWLANES, sub = lane % ROWLANES;

    extern __shared__ __align__(16) unsigned char shared_raw[];
    T* vals = reinterpret_cast<T*>(shared_raw);  // R k
    T* wins = vals + (size_t)R * k;              // R w
    T* bia = wins + (size_t)R * w;               // R
    T* wo = bia + R;                             // R MAXOUT: readout weights of the rows
    T* r = wo + (size_t)R * MAXOUT;              // 2 C n: the state, two buffers
    T* part = r + 2 * (size_t)total;             // 2 CLUSTER MAXOUT: the blocks' shares
    T* red = part + 2 * CLUSTER * MAXOUT;        // warps MAXOUT
    T* y = red + warps * MAXOUT;                 // MAXOUT
    int* wnd = reinterpret_cast<int*>(y + MAXOUT);  // C w
    Col* cl = reinterpret_cast<Col*>(wnd + C * w);  // R k

    if (mode == 1) {
        for (int t = 0; t < length; ++t) cluster_sync();
        return;
    }
    const T leak = *leak_p;
    for (int i = threadIdx.x; i < mine * k; i += blockDim.x) {
        vals[i] = values[(size_t)first * k + i];
        // a position in the whole state: the row's chunk's offset added
        cl[i] = (Col)(cols[(size_t)first * k + i] + ((first + i / k) / n) * n);
    }
    for (int i = threadIdx.x; i < mine * w; i += blockDim.x) wins[i] = win[(size_t)first * w + i];
    for (int i = threadIdx.x; i < mine; i += blockDim.x) {
        const int row = first + i, c = row / n, col = row - c * n;
        bia[i] = bias[row];
#pragma unroll
        for (int j = 0; j < MAXOUT; ++j)
            wo[i * MAXOUT + j] = (j < outs && j / o == c) ? wout[(size_t)j * n + col] : T(0);
    }
    for (int i = threadIdx.x; i < C * w; i += blockDim.x) wnd[i] = window[i];
    for (int i = threadIdx.x; i < total; i += blockDim.x) r[i] = r0[i];
    __syncthreads();

    // the block's share of a readout from acc (per thread), into
    // part[slot][rank] of every block
    auto send_share = [&](const T* acc, int slot) {
#pragma unroll
        for (int j = 0; j < MAXOUT; ++j) {
            const T s = warp_sum(acc[j]);
            if (lane == 0) red[warp * MAXOUT + j] = s;
        }
        __syncthreads();
        if (threadIdx.x < outs) {
            T s = 0;
            for (int v = 0; v < warps; ++v) s += red[v * MAXOUT + threadIdx.x];
            T* dst = part + ((size_t)slot * CLUSTER + rank) * MAXOUT + threadIdx.x;
            for (unsigned q = 0; q < CLUSTER; ++q) store_in(dst, q, s);
        }
    };

    {
        T acc[MAXOUT];
#pragma unroll
        for (int j = 0; j < MAXOUT; ++j) acc[j] = 0;
        for (int i = threadIdx.x; i < mine; i += blockDim.x) {
#pragma unroll
            for (int j = 0; j < MAXOUT; ++j) acc[j] += wo[i * MAXOUT + j] * r[first + i];
        }
        send_share(acc, 0);
        cluster_sync();
    }

    for (int t = 0; t < length; ++t) {
        const int cur = t & 1, nxt = cur ^ 1;
        const T* rc = r + (size_t)cur * total;
        T* rn = r + (size_t)nxt * total;
        if (threadIdx.x < outs) {
            T s = 0;
            for (int q = 0; q < CLUSTER; ++q) s += part[((size_t)cur * CLUSTER + q) * MAXOUT + threadIdx.x];
            y[threadIdx.x] = s;
            if (rank == 0) y_out[(size_t)t * outs + threadIdx.x] = s;
        }
        __syncthreads();
        if (t == length - 1) break;

        T acc[MAXOUT];
#pragma unroll
        for (int j = 0; j < MAXOUT; ++j) acc[j] = 0;
        for (int base = warp * per_warp; base < mine; base += warps * per_warp) {
            const int li = base + lane / ROWLANES;
            const bool live = li < mine;
            T s = 0;
            if (live) {
                const T* vr = vals + (size_t)li * k;
                const Col* cr = cl + (size_t)li * k;
                for (int j = sub; j < k; j += ROWLANES) s += vr[j] * rc[cr[j]];
            }
            s = group_allsum(s);
            if (live) {
                const int row = first + li, c = row / n;
                T p = 0;
                for (int i = 0; i < w; ++i) p += wins[li * w + i] * y[wnd[c * w + i]];
                const T v = leak * tanh(s + (p + bia[li])) + (1 - leak) * rc[row];
                for (unsigned q = sub; q < CLUSTER; q += ROWLANES) store_in(rn + row, q, v);
                if (sub == 0) {
#pragma unroll
                    for (int j = 0; j < MAXOUT; ++j) acc[j] += wo[li * MAXOUT + j] * v;
                }
            }
        }
        send_share(acc, nxt);
        cluster_sync();
    }
}
