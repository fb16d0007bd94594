// Internal to the elementwise kernels: elementwise_impl.inc is compiled twice, by elementwise.cpp
// in namespace isa::baseline for the build's instruction set (x86-64-v3) and by
// elementwise_avx512.cpp in namespace isa::avx512 under cpu_isa.h's target region, two
// translation units that the build compiles at once; elementwise.h's functions, in
// elementwise.cpp, pick a copy per call by use_avx512().
#pragma once

#include <cstddef>

#include "loom/kernels/detail.h"
#include "loom/kernels/elementwise.h"

namespace loom::kernels::isa {

// dx (+)= scale * src summed over the axes along which operand `target` of p (1 or 2) is
// broadcast; src has the layout of p's space (operand 0), dx that operand's. One copy, the
// baseline's in elementwise.cpp, which both copies of elementwise_impl.inc call: a sum is bound
// by memory, and detail::reduce_plan, defined outside the target region, is compiled for the
// baseline, where it could not inline an AVX-512 copy's loads and called them once per element.
template <bool Accumulate, typename T>
void reduce_to_operand(const detail::Plan& p, size_t target, const T* src, T scale, T* dx);

namespace avx512 {
template <typename T>
void unary(UnaryOp op, size_t n, const T* x, T* y, const UnaryParams& params);
template <typename T>
void unary_backward(UnaryOp op, size_t n, const T* x, const T* y, const T* dy, T* dx,
                    bool accumulate, const UnaryParams& params);
template <typename T>
void binary(BinaryOp op, const Dims& out_dims, const Dims& a_dims, const T* a, const Dims& b_dims,
            const T* b, T* y);
template <typename T>
void binary_backward(BinaryOp op, int which, const Dims& out_dims, const Dims& a_dims, const T* a,
                     const Dims& b_dims, const T* b, const T* dy, T* dx, bool accumulate);
template <typename T>
void ternary(TernaryOp op, const Dims& out_dims, const Dims& c_dims, const T* c, const Dims& a_dims,
             const T* a, const Dims& b_dims, const T* b, T* y);
template <typename T>
void ternary_backward(TernaryOp op, int which, const Dims& out_dims, const Dims& cond_dims,
                      const T* cond, const T* y, const Dims& x_dims, const T* dy, T* dx,
                      bool accumulate);
}  // namespace avx512

}  // namespace loom::kernels::isa
