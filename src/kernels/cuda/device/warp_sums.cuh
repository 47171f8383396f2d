// 32 sums over a warp at once: each lane holds 32 values v[0..31], and lane l gets the sum of
// every lane's v[l], added in warp_reduce's tree (device/common.cuh), so each sum has the bits
// warp_reduce gives it. By recursive halving: at each xor offset a lane keeps half of its
// values and sends its partner the other half, so 32 sums take 31 shuffles where 32
// warp_reduce calls take 160 (a kernel that reduces many values a warp is bound by them).
//
// Why the bits agree: warp_reduce's lane L adds, at offset o, its sum over the lanes L ^ (the
// offsets so far) and its partner L ^ o's; every lane of such a group holds the same bits (each
// step adds the same two values, in either order). Here the lane that keeps value j at offset o
// adds the same two group sums, so the last lane holds warp_reduce's bits for v[j].
#pragma once

namespace dsv4::kernels::cuda {

// One halving: lanes with `kOffset` set keep v[kOffset .. 2·kOffset) (moved to v[0 .. kOffset)),
// the others v[0 .. kOffset), each added to its partner's copy of the same values.
template <int kOffset>
__device__ __forceinline__ void warp_sums_halve(float (&v)[32], bool upper) {
#pragma unroll
  for (int j = 0; j < kOffset; ++j) {
    const float send = upper ? v[j] : v[j + kOffset];
    const float keep = upper ? v[j + kOffset] : v[j];
    v[j] = keep + __shfl_xor_sync(0xffffffffu, send, kOffset);
  }
}

// Returns the sum over the warp of v[lane]; v is overwritten. Every lane of the warp calls it.
__device__ __forceinline__ float warp_sums(float (&v)[32]) {
  const int lane = threadIdx.x % 32;
  warp_sums_halve<16>(v, (lane & 16) != 0);
  warp_sums_halve<8>(v, (lane & 8) != 0);
  warp_sums_halve<4>(v, (lane & 4) != 0);
  warp_sums_halve<2>(v, (lane & 2) != 0);
  warp_sums_halve<1>(v, (lane & 1) != 0);
  return v[0];
}

}  // namespace dsv4::kernels::cuda
