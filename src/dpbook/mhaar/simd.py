"""Explicit SIMD code for the MHAAR kernel (:mod:`dpbook.mhaar.paper_chain`).

Steps 2-4 of the MHAAR iteration (Algorithm 8 of Alparslan & Yildirim 2022, the
baseline of Section 6 of the paper) spend their time in three loops over the n x N
auxiliary draws: the ziggurat's table look-ups, the clipped-Laplace weights
h(y_t | z_t^(i), theta) of both thetas, and the inverse-cdf resampling.  Those loops are
written here as numba intrinsics that emit LLVM IR on explicit 8-lane (AVX-512) vectors
of doubles (``Vec``), with 2^x computed by a polynomial.  Nothing here is statistical:
the functions are tested one by one against numpy in tests/test_mhaar.py.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def bits_to_f64(typingctx, x):
    """Reinterpret the 64 bits of an int64 as a float64 (no conversion)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(x), codegen


@intrinsic
def f64_to_bits(typingctx, x):
    """The 64 bits of a float64 as an int64 (no conversion)."""
    if not isinstance(x, types.Float):
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(x), codegen


LOG2E = 1.4426950408889634
LN2 = math.log(2.0)


FM = {"contract"}  # let LLVM fuse multiply-adds (the same code runs on every thread)

# 2^f on |f| <= 1/2: degree-10 Chebyshev interpolant in monomial form (max relative
# error 1.6e-15, checked in tests/test_mhaar.py)
_P = (1.0000000000000007, 0.6931471805599483, 0.24022650695901254, 0.055504108664544756,
      0.00961812911053657, 0.0013333558214738293, 0.00015403526882354606,
      1.525266622014565e-05, 1.3217210256367588e-06, 1.0206977921453389e-07,
      6.767963482574983e-09)
_MAGIC = 6755399441055744.0  # 1.5 * 2^52: x + _MAGIC rounds x to an integer
_MAGIC_BIAS = int(np.float64(_MAGIC).view(np.int64)) - 1023


LANES = 8  # lanes of the explicit vectors (one AVX-512 register of doubles)


class Vec:
    """Emit LLVM IR on <LANES x double> vectors: loads, stores, fma, clip, abs, 2^x.

    LLVM's loop vectoriser picks 256-bit vectors on this class of CPU and rematerialises
    constants inside the loop; writing the hot loop with explicit 512-bit vectors is 1.7
    times faster there.  On CPUs without AVX-512, LLVM splits the vectors (same results).
    """

    def __init__(self, context, builder):
        self.b = builder
        self.dbl = ir.DoubleType()
        self.i64 = ir.IntType(64)
        self.vd = ir.VectorType(self.dbl, LANES)
        self.vi = ir.VectorType(self.i64, LANES)
        self.fmafn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(self.vd, [self.vd] * 3), f"llvm.fma.v{LANES}f64")

    def data(self, context, aryty, value):
        return context.make_array(aryty)(context, self.b, value=value).data

    def _addr(self, p, j, vt=None):
        et = self.dbl if vt is None or vt is self.vd else self.i64
        if getattr(p.type, "is_opaque", False):
            return self.b.gep(p, [j], inbounds=True, source_etype=et)
        return self.b.gep(p, [j], inbounds=True)

    def load(self, p, j, vt=None):
        vt = self.vd if vt is None else vt
        a = self._addr(p, j, vt)
        if getattr(p.type, "is_opaque", False):
            return self.b.load(a, typ=vt, align=8)
        return self.b.load(self.b.bitcast(a, vt.as_pointer()), align=8)

    def store(self, v, p, j, vt=None):
        vt = self.vd if vt is None else vt
        a = self._addr(p, j, vt)
        if not getattr(p.type, "is_opaque", False):
            a = self.b.bitcast(a, vt.as_pointer())
        self.b.store(v, a, align=8)

    def splat_int(self, x):
        v = self.b.insert_element(ir.Constant(self.vi, ir.Undefined), x,
                                  ir.Constant(ir.IntType(32), 0))
        return self.b.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), LANES),
                                                       [0] * LANES))

    def scalar(self, p, k):
        a = self._addr(p, ir.Constant(self.i64, k))
        if getattr(p.type, "is_opaque", False):
            return self.b.load(a, typ=self.dbl)
        return self.b.load(a)

    def splat(self, x):
        v = self.b.insert_element(ir.Constant(self.vd, ir.Undefined), x,
                                  ir.Constant(ir.IntType(32), 0))
        return self.b.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), LANES),
                                                       [0] * LANES))

    def const(self, c):
        return ir.Constant(self.vd, [c] * LANES)

    def fma(self, a, x, c):
        return self.b.call(self.fmafn, [a, x, c])

    def clip(self, x, lo, hi):
        b = self.b
        x = b.select(b.fcmp_ordered(">", x, lo), x, lo)
        return b.select(b.fcmp_ordered("<", x, hi), x, hi)

    def abs(self, x):
        mask = ir.Constant(self.vi, [0x7FFFFFFFFFFFFFFF] * LANES)
        return self.b.bitcast(self.b.and_(self.b.bitcast(x, self.vi), mask), self.vd)

    def exp2(self, x):
        """2^x for -1000 < x < 1000, relative error below 2e-15, vectorised.

        x = k + f with k = round(x) (by the 1.5 * 2^52 trick, which also leaves k in the
        low bits of x + 1.5 * 2^52) and |f| <= 1/2; 2^f by the degree-10 polynomial
        _P (Estrin's scheme: short dependency chains); 2^k from its exponent bits.
        """
        b, c = self.b, [self.const(v) for v in _P]
        kk = b.fadd(x, self.const(_MAGIC))
        f = b.fsub(x, b.fsub(kk, self.const(_MAGIC)))
        f2 = b.fmul(f, f)
        f4 = b.fmul(f2, f2)
        p01 = self.fma(c[1], f, c[0])
        p23 = self.fma(c[3], f, c[2])
        p45 = self.fma(c[5], f, c[4])
        p67 = self.fma(c[7], f, c[6])
        p89 = self.fma(c[9], f, c[8])
        p03 = self.fma(f2, p23, p01)
        p47 = self.fma(f2, p67, p45)
        p8a = self.fma(f2, c[10], p89)
        p = self.fma(f4, self.fma(f4, p8a, p47), p03)
        e = b.shl(b.sub(b.bitcast(kk, self.vi), ir.Constant(self.vi, [_MAGIC_BIAS] * LANES)),
                  ir.Constant(self.vi, [52] * LANES))
        return b.fmul(p, b.bitcast(e, self.vd))


@intrinsic
def mix_lanes(typingctx, keys, out, inc, count):
    """out[j] = mix64(keys[j] + inc) (SplitMix64 output ``inc / GAMMA`` of stream keys[j])
    for j < count, a multiple of LANES; uint64 arrays."""

    def codegen(context, builder, signature, args):
        v = Vec(context, builder)
        pk = v.data(context, signature.args[0], args[0])
        po = v.data(context, signature.args[1], args[1])
        vi = v.vi
        b = builder

        def c(x):
            return ir.Constant(vi, [x] * LANES)

        inc = v.splat_int(args[2])
        with cgutils.for_range_slice(builder, ir.Constant(v.i64, 0), args[3],
                                     ir.Constant(v.i64, LANES)) as (j, _):
            z = b.add(v.load(pk, j, vi), inc)
            z = b.mul(b.xor(z, b.lshr(z, c(30))), c(0xBF58476D1CE4E5B9))
            z = b.mul(b.xor(z, b.lshr(z, c(27))), c(0x94D049BB133111EB))
            v.store(b.xor(z, b.lshr(z, c(31))), po, j, vi)
        return context.get_dummy_value()

    return types.void(keys, out, types.uint64, count), codegen


@intrinsic
def zig_lookup(typingctx, words, wi, ki, wb, pos, rows, count):
    """Table look-ups of the ziggurat's fast path, rows 1 .. rows-1, lanes j < count:
    wb[i, j] = wi[u & 0xFF] for the word u = words[i, j]; the positions i * count + j of
    the words with (u >> 9) & (2^52 - 1) >= ki[u & 0xFF] (rejected by the fast path) go
    to pos[0 .. nbad-1] in order; returns nbad.  words, wb: C-contiguous 2-d arrays of
    the same shape; wi float64 and ki uint64 tables of 256 entries.

    Scalar on purpose (vector gathers are slower on this machine); written in IR so that
    the loop keeps its few values in registers (in the compiled block function the same
    loop reloaded the table addresses and masks at every step, 1.5 times slower).
    """

    def codegen(context, builder, signature, args):
        b = builder
        i64 = ir.IntType(64)
        warr = context.make_array(signature.args[0])(context, builder, value=args[0])
        stride = b.extract_value(warr.shape, 1)
        pw = warr.data
        pwi, pki, pwb, ppos = (
            context.make_array(signature.args[k])(context, builder, value=args[k]).data
            for k in (1, 2, 3, 4))
        nbad = cgutils.alloca_once_value(builder, ir.Constant(i64, 0))
        with cgutils.for_range_slice(builder, ir.Constant(i64, 1), args[5],
                                     ir.Constant(i64, 1)) as (i, _):
            base = b.mul(i, stride)
            with cgutils.for_range(builder, args[6]) as loop:
                j = loop.index
                ij = b.add(base, j)
                u = b.load(b.gep(pw, [ij], inbounds=True))
                idx = b.and_(u, ir.Constant(i64, 0xFF))
                b.store(b.load(b.gep(pwi, [idx], inbounds=True)),
                        b.gep(pwb, [ij], inbounds=True))
                rabs = b.and_(b.lshr(u, ir.Constant(i64, 9)),
                              ir.Constant(i64, 0x000FFFFFFFFFFFFF))
                k = b.load(b.gep(pki, [idx], inbounds=True))
                with cgutils.if_unlikely(builder, b.icmp_unsigned(">=", rabs, k)):
                    nb = b.load(nbad)
                    b.store(b.add(b.mul(i, args[6]), j), b.gep(ppos, [nb], inbounds=True))
                    b.store(b.add(nb, ir.Constant(i64, 1)), nbad)
        return b.load(nbad)

    return types.int64(words, wi, ki, wb, pos, rows, count), codegen


@intrinsic
def count_le_lanes(typingctx, c, g, k, rows, count):
    """k[j] = #{i < rows : c[i, j] <= g[j]} for j < count (a multiple of LANES); c is a
    C-contiguous 2-d float array, k an int64 array (the inverse-cdf index of a cumulative
    sum row-wise)."""

    def codegen(context, builder, signature, args):
        v = Vec(context, builder)
        b = builder
        cty = signature.args[0]
        carr = context.make_array(cty)(context, builder, value=args[0])
        stride = b.extract_value(carr.shape, 1)
        pc = carr.data
        pg = v.data(context, signature.args[1], args[1])
        pk = v.data(context, signature.args[2], args[2])
        acc = cgutils.alloca_once(builder, v.vi)
        one = ir.Constant(v.vi, [1] * LANES)
        zero = ir.Constant(v.vi, [0] * LANES)
        with cgutils.for_range_slice(builder, ir.Constant(v.i64, 0), args[4],
                                     ir.Constant(v.i64, LANES)) as (j, _):
            gv = v.load(pg, j)
            b.store(zero, acc)
            with cgutils.for_range(builder, args[3]) as loop:
                row = v.load(pc, b.add(b.mul(loop.index, stride), j))
                le = b.fcmp_ordered("<=", row, gv)
                b.store(b.add(b.load(acc), b.select(le, one, zero)), acc)
            v.store(b.load(acc), pk, j, v.vi)
        return context.get_dummy_value()

    return types.void(c, g, k, rows, count), codegen


@intrinsic
def exp2_lanes(typingctx, x, out, count):
    """out[j] = 2^x[j] for j < count (count a multiple of LANES)."""

    def codegen(context, builder, signature, args):
        v = Vec(context, builder)
        px = v.data(context, signature.args[0], args[0])
        po = v.data(context, signature.args[1], args[1])
        with cgutils.for_range_slice(builder, ir.Constant(v.i64, 0), args[2],
                                     ir.Constant(v.i64, LANES)) as (j, _):
            v.store(v.exp2(v.load(px, j)), po, j)
        return context.get_dummy_value()

    return types.void(x, out, count), codegen


@intrinsic
def weights_lanes(typingctx, zb, y, l, r, off, ib, th, s0, s1, c0, c1, rows, count):
    """Cumulative weights of the auxiliary draws i < rows for the lanes j < count (a
    multiple of LANES), both thetas, (mu_0, sg_0, mu_1, sg_1) = th[0:4]:

        ck[i, j] = ck[i-1, j] + 2^(off[j] - |y[j] - clip(mu_k + sg_k zb[i, j], l[j], r[j])| ib[j])

    (ck[-1, j] = 0) and sk[j] = ck[rows-1, j].  zb, c0, c1 are C-contiguous 2-d arrays of
    the same shape.  The loop over i is inside the loop over the lanes, so the running
    sums and the per-lane data stay in registers.
    """

    def codegen(context, builder, signature, args):
        v = Vec(context, builder)
        b = builder
        py, pl, pr, poff, pib, pth, ps0, ps1 = (
            v.data(context, ty, val) for ty, val in zip(signature.args[1:9], args[1:9]))
        zarr = context.make_array(signature.args[0])(context, builder, value=args[0])
        stride = b.extract_value(zarr.shape, 1)
        pz = zarr.data
        pc0, pc1 = (v.data(context, signature.args[k], args[k]) for k in (9, 10))
        mu0, sg0, mu1, sg1 = (v.splat(v.scalar(pth, k)) for k in range(4))
        acc0 = cgutils.alloca_once(builder, v.vd)
        acc1 = cgutils.alloca_once(builder, v.vd)
        with cgutils.for_range_slice(builder, ir.Constant(v.i64, 0), args[12],
                                     ir.Constant(v.i64, LANES)) as (j, _):
            lo, hi, yy = v.load(pl, j), v.load(pr, j), v.load(py, j)
            oo, bb = v.load(poff, j), v.load(pib, j)
            b.store(v.const(0.0), acc0)
            b.store(v.const(0.0), acc1)
            with cgutils.for_range(builder, args[11]) as loop:
                ij = b.add(b.mul(loop.index, stride), j)
                x = v.load(pz, ij)
                for mu, sg, pacc, pc in ((mu0, sg0, acc0, pc0), (mu1, sg1, acc1, pc1)):
                    d = v.abs(b.fsub(yy, v.clip(v.fma(sg, x, mu), lo, hi)))
                    acc = b.fadd(b.load(pacc), v.exp2(v.fma(b.fneg(d), bb, oo)))
                    b.store(acc, pacc)
                    v.store(acc, pc, ij)
            v.store(b.load(acc0), ps0, j)
            v.store(b.load(acc1), ps1, j)
        return context.get_dummy_value()

    return types.void(zb, y, l, r, off, ib, th, s0, s1, c0, c1, rows, count), codegen


@njit(cache=True)
def exp2_array(x):
    """2^x by the kernel's vector code (for tests)."""
    n = x.shape[0]
    npad = -(-n // LANES) * LANES
    xp = np.zeros(npad)
    xp[:n] = x
    out = np.empty(npad)
    exp2_lanes(xp, out, npad)
    return out[:n]
