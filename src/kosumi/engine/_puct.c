/*
 * kosumi.engine._puct: the C versions of the search's two per-node rules (kosumi/engine/puct.py
 * documents them and holds the exact Python versions, used when this module is not built).
 *
 *   children(policy, /) -> (moves: bytes, priors: bytes)
 *   score_utility(mean, stdev, center, static, static_scale, dynamic, dynamic_scale, /) -> float
 *   select_child(st, priors, agg, params, own_utility, sign, is_root, /) -> int
 *   update_node(st, priors, own, params, sign, agg, parent_st, slot, vl_release, bias, /)
 *       -> None
 *
 * `st` holds a node's per-child records, NF float64 fields each (the field order is the
 * F_* enum below, the same as puct.py's); `agg` is the node's own record; `own` the node's own
 * evaluation; `params` the search settings in puct.py's P_* order. Every value is from White's
 * view; `sign` is +1.0 when White is to move at the node, -1.0 for Black.
 *
 * The arithmetic is written operation for operation like the Python version (the build turns
 * off floating-point contraction), so both give the same bits.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { F_N, F_VL, F_W, F_W2, F_U, F_U2, F_WL, F_SM, F_SM2, F_LD, NF };
enum { O_WL, O_SM, O_SM2, O_LD, O_U, O_W, O_BIAS_DELTA, O_BIAS_WEIGHT, NOWN };
enum {
    P_CPUCT, P_CPUCT_LOG, P_CPUCT_BASE, P_STDEV_PRIOR, P_STDEV_PRIOR_WEIGHT, P_STDEV_SCALE,
    P_FPU, P_ROOT_FPU, P_FPU_POW, P_VL_WEIGHT, P_RADIUS, P_VALUE_WEIGHT_EXP, P_NOISE_PRUNE,
    P_NOISE_SCALE, P_BIAS_FACTOR, P_BIAS_EXP, NPARAMS
};
enum { B_DELTA, B_WEIGHT, NBIAS };

#define STACK_CHILDREN 400

/* ------------------------------------------------------------------------------------------ */

/* Is the struct-module format string a native-order float64? */
static int
is_f64(const char *fmt)
{
    const int little = (PY_LITTLE_ENDIAN != 0);
    if (fmt == NULL)
        return 0;
    if (fmt[0] == '@' || fmt[0] == '=' || (fmt[0] == '<' && little) ||
        ((fmt[0] == '>' || fmt[0] == '!') && !little))
        fmt++;
    return fmt[0] == 'd' && fmt[1] == '\0';
}

/* A C-contiguous float64 buffer of `want` items (want < 0: any count, returned in *count). */
static int
f64_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t want, Py_ssize_t *count, int writable,
           const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        if (PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s must be a %sC-contiguous float64 buffer", name,
                         writable ? "writable " : "");
        }
        return -1;
    }
    if (view->itemsize != 8 || !is_f64(view->format)) {
        PyErr_Format(PyExc_ValueError, "%s must be a float64 buffer (got format '%s')", name,
                     view->format ? view->format : "B");
        PyBuffer_Release(view);
        return -1;
    }
    if (want >= 0 && view->len / 8 != want) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zd float64 items (got %zd)", name, want,
                     view->len / 8);
        PyBuffer_Release(view);
        return -1;
    }
    if (count != NULL)
        *count = view->len / 8;
    return 0;
}

/* The priors of k >= 1 children and the records of the first r <= k of them (st: r*NF items;
   the others have not been reached). */
static int
child_buffers(PyObject *st_obj, PyObject *pr_obj, Py_buffer *st, Py_buffer *pr, Py_ssize_t *k,
              Py_ssize_t *r, int writable)
{
    Py_ssize_t nst;
    if (f64_buffer(pr_obj, pr, -1, k, 0, "priors") < 0)
        return -1;
    if (*k < 1) {
        PyErr_SetString(PyExc_ValueError, "a node needs at least one child");
        PyBuffer_Release(pr);
        return -1;
    }
    if (f64_buffer(st_obj, st, -1, &nst, writable, "st") < 0) {
        PyBuffer_Release(pr);
        return -1;
    }
    if (nst % NF != 0 || nst > *k * NF) {
        PyErr_Format(PyExc_ValueError, "st must hold %d fields for each of the first children "
                     "(at most %zd children: %zd items, got %zd)", NF, *k, *k * NF, nst);
        PyBuffer_Release(st);
        PyBuffer_Release(pr);
        return -1;
    }
    *r = nst / NF;
    return 0;
}

static int
as_doubles(PyObject *const *args, double *out, int n)
{
    int i;
    for (i = 0; i < n; i++) {
        out[i] = PyFloat_AsDouble(args[i]);
        if (out[i] == -1.0 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* children                                                                                    */
/* ------------------------------------------------------------------------------------------ */

PyDoc_STRVAR(children_doc,
"children(policy, /) -> (moves: bytes, priors: bytes)\n\n"
"A search node's children from a float32 policy over points + pass (pass last): the indices\n"
"with policy > 0, and always pass, as int16 items, with their priors normalised to sum 1 (the\n"
"sum taken in index order) as float64 items, sorted by prior, highest first (ties: lower\n"
"index first).");

/* Sort n 64-bit keys ascending (a bottom-up merge sort through `tmp`). */
static void
sort_keys(uint64_t *a, uint64_t *tmp, Py_ssize_t n)
{
    Py_ssize_t width, lo, i, j, k, mid, hi;
    uint64_t *src = a, *dst = tmp, *t;
    for (width = 1; width < n; width *= 2) {
        for (lo = 0; lo < n; lo += 2 * width) {
            mid = lo + width < n ? lo + width : n;
            hi = lo + 2 * width < n ? lo + 2 * width : n;
            i = lo;
            j = mid;
            k = lo;
            while (i < mid && j < hi)
                dst[k++] = src[i] <= src[j] ? src[i++] : src[j++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, (size_t)n * sizeof(uint64_t));
}

static PyObject *
children(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer pv;
    Py_ssize_t k, i, m = 0;
    const float *pol;
    short *moves;
    double *priors, total = 0.0, scale;
    uint64_t *keys = NULL;
    PyObject *mb = NULL, *pb = NULL, *result = NULL;
    (void)self;

    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "children() takes exactly 1 argument (%zd given)", nargs);
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &pv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (pv.itemsize != 4 || pv.format == NULL || strcmp(pv.format, "f") != 0) {
        PyErr_SetString(PyExc_ValueError, "policy must be a C-contiguous float32 buffer");
        goto done;
    }
    k = pv.len / 4;
    if (k < 1 || k > 32767) {
        PyErr_Format(PyExc_ValueError, "policy must have 1..32767 entries, not %zd", k);
        goto done;
    }
    pol = (const float *)pv.buf;
    keys = (uint64_t *)PyMem_Malloc((size_t)(2 * k) * sizeof(uint64_t));
    mb = PyBytes_FromStringAndSize(NULL, k * (Py_ssize_t)sizeof(short));
    pb = PyBytes_FromStringAndSize(NULL, k * (Py_ssize_t)sizeof(double));
    if (keys == NULL || mb == NULL || pb == NULL) {
        if (keys == NULL)
            PyErr_NoMemory();
        goto done;
    }
    moves = (short *)PyBytes_AS_STRING(mb);
    priors = (double *)PyBytes_AS_STRING(pb);
    for (i = 0; i < k; i++) {
        if (pol[i] > 0.0f || i == k - 1) {
            /* a positive float's bits order like the float: sorting (max - bits, index)
               ascending gives the highest prior first, ties by index */
            uint32_t bits = 0;
            if (pol[i] > 0.0f)
                memcpy(&bits, &pol[i], 4);
            keys[m] = ((uint64_t)(0xFFFFFFFFu - bits) << 16) | (uint64_t)i;
            total += pol[i] > 0.0f ? (double)pol[i] : 0.0;
            m++;
        }
    }
    sort_keys(keys, keys + k, m);
    scale = total > 0.0 ? 1.0 / total : 0.0;
    for (i = 0; i < m; i++) {
        const Py_ssize_t j = (Py_ssize_t)(keys[i] & 0xFFFF);
        moves[i] = (short)j;
        priors[i] = (pol[j] > 0.0f ? (double)pol[j] : 0.0) * scale;
    }
    if (total <= 0.0)
        priors[0] = 1.0;  /* nothing but pass */
    if (_PyBytes_Resize(&mb, m * (Py_ssize_t)sizeof(short)) < 0 ||
        _PyBytes_Resize(&pb, m * (Py_ssize_t)sizeof(double)) < 0)
        goto done;
    result = PyTuple_Pack(2, mb, pb);
done:
    PyMem_Free(keys);
    Py_XDECREF(mb);
    Py_XDECREF(pb);
    PyBuffer_Release(&pv);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* score_utility                                                                               */
/* ------------------------------------------------------------------------------------------ */

#define NZ 101
static double grid_z[NZ], grid_w[NZ];

/* The normal grid of puct.py: z = -5 .. 5 by 0.1, weights exp(-z^2/2) summed in order. */
static void
init_grid(void)
{
    double total = 0.0;
    int i;
    for (i = 0; i < NZ; i++) {
        grid_z[i] = -5.0 + 0.1 * i;
        grid_w[i] = exp(-0.5 * grid_z[i] * grid_z[i]);
        total += grid_w[i];
    }
    for (i = 0; i < NZ; i++)
        grid_w[i] = grid_w[i] / total;
}

/* E[2/pi atan((X - center) / scale)], X ~ N(mean, stdev^2), on the grid (stdev 0: the point). */
static double
score_value(double mean, double stdev, double center, double scale)
{
    double acc = 0.0;
    int i;
    if (stdev <= 0.0)
        return atan((mean - center) / scale) * 0.6366197723675814;
    for (i = 0; i < NZ; i++)
        acc += grid_w[i] * atan((mean + stdev * grid_z[i] - center) / scale);
    return acc * 0.6366197723675814;
}

PyDoc_STRVAR(score_utility_doc,
"score_utility(mean, stdev, center, static, static_scale, dynamic, dynamic_scale, /) -> float\n"
"\n"
"static * E[2/pi atan(X / static_scale)] + dynamic * E[2/pi atan((X - center) /\n"
"dynamic_scale)] for X ~ N(mean, stdev^2) (kosumi.engine.puct.score_utility).");

static PyObject *
score_utility(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    double v[7], out = 0.0;
    (void)self;
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "score_utility() takes exactly 7 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    if (as_doubles(args, v, 7) < 0)
        return NULL;
    if (v[3] != 0.0)
        out += v[3] * score_value(v[0], v[1], 0.0, v[4]);
    if (v[5] != 0.0)
        out += v[5] * score_value(v[0], v[1], v[2], v[6]);
    return PyFloat_FromDouble(out);
}

/* ------------------------------------------------------------------------------------------ */
/* select_child                                                                                */
/* ------------------------------------------------------------------------------------------ */

PyDoc_STRVAR(select_child_doc,
"select_child(st, priors, agg, params, own_utility, sign, is_root, /) -> int\n\n"
"The child a playout descends to: argmax of explore + value (kosumi.engine.puct documents the\n"
"formula). Ties go to the lowest index.");

static PyObject *
select_child(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer stv, prv, aggv, parv;
    Py_ssize_t k, r, i, best_i = 0;
    double sc[3], own_u, sign, mass = 0.0, tw = 0.0, parent_u, parent_w, stdev, factor;
    double fpu_parent, fpu, red, scaling, best = 0.0;
    const double *st, *pr, *agg, *p;
    int is_root;
    (void)self;

    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "select_child() takes exactly 7 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    if (as_doubles(args + 4, sc, 3) < 0)
        return NULL;
    own_u = sc[0];
    sign = sc[1];
    is_root = sc[2] != 0.0;
    if (child_buffers(args[0], args[1], &stv, &prv, &k, &r, 0) < 0)
        return NULL;
    if (f64_buffer(args[2], &aggv, NF, NULL, 0, "agg") < 0)
        goto fail2;
    if (f64_buffer(args[3], &parv, NPARAMS, NULL, 0, "params") < 0)
        goto fail3;
    st = (const double *)stv.buf;
    pr = (const double *)prv.buf;
    agg = (const double *)aggv.buf;
    p = (const double *)parv.buf;

    for (i = 0; i < r; i++) {
        const double *c = st + i * NF;
        if (c[F_N] > 0.0 || c[F_VL] > 0.0) {
            mass += pr[i];
            tw += c[F_W];
        }
    }
    parent_u = agg[F_U];
    parent_w = agg[F_W];
    if (agg[F_N] <= 0.0 || parent_w <= 1.0) {
        stdev = p[P_STDEV_PRIOR];
    } else {
        const double u_sq = parent_u * parent_u;
        const double prior_var = p[P_STDEV_PRIOR] * p[P_STDEV_PRIOR];
        double u2 = agg[F_U2];
        double var;
        if (u2 < u_sq)
            u2 = u_sq;
        var = ((u_sq + prior_var) * p[P_STDEV_PRIOR_WEIGHT] + u2 * parent_w)
              / (p[P_STDEV_PRIOR_WEIGHT] + parent_w - 1.0) - u_sq;
        stdev = sqrt(var > 0.0 ? var : 0.0);
    }
    factor = 1.0 + p[P_STDEV_SCALE] * (stdev / p[P_STDEV_PRIOR] - 1.0);
    if (p[P_FPU_POW] >= 0.0) {
        double a = pow(mass, p[P_FPU_POW]);
        if (a > 1.0)
            a = 1.0;
        fpu_parent = a * parent_u + (1.0 - a) * own_u;
    } else {
        fpu_parent = parent_u;
    }
    red = (is_root ? p[P_ROOT_FPU] : p[P_FPU]) * sqrt(mass);
    fpu = fpu_parent - sign * red;
    scaling = (p[P_CPUCT] + p[P_CPUCT_LOG] * log((tw + p[P_CPUCT_BASE]) / p[P_CPUCT_BASE]))
              * sqrt(tw + 0.01) * factor;

    /* the children with records, then the first without one (a new child: the highest prior
       of those not reached, the children being sorted by prior) */
    for (i = 0; i < (r < k ? r + 1 : k); i++) {
        const double *c = i < r ? st + i * NF : NULL;
        double u, w, v;
        if (c == NULL || c[F_N] <= 0.0 || c[F_W] <= 0.0) {
            u = fpu;
            w = 0.0;
        } else {
            u = c[F_U];
            w = c[F_W];
        }
        if (c != NULL && c[F_VL] > 0.0) {
            const double vlw = c[F_VL] * p[P_VL_WEIGHT];
            const double vlu = -sign * p[P_RADIUS];
            const double frac = vlw / (vlw + (w > 0.25 ? w : 0.25));
            u = u + (vlu - u) * frac;
            w = w + vlw;
        }
        v = scaling * pr[i] / (1.0 + w) + sign * u;
        if (i == 0 || v > best) {
            best = v;
            best_i = i;
        }
    }
    PyBuffer_Release(&parv);
    PyBuffer_Release(&aggv);
    PyBuffer_Release(&stv);
    PyBuffer_Release(&prv);
    return PyLong_FromSsize_t(best_i);

fail3:
    PyBuffer_Release(&aggv);
fail2:
    PyBuffer_Release(&stv);
    PyBuffer_Release(&prv);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* update_node                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* Student's t distribution with 3 degrees of freedom: the CDF, in closed form. */
static double
t3_cdf(double z)
{
    const double x = z / 1.7320508075688772;  /* sqrt(3) */
    return 0.5 + (x / (1.0 + x * x) + atan(x)) / 3.141592653589793;
}

PyDoc_STRVAR(update_node_doc,
"update_node(st, priors, own, params, sign, agg, parent_st, slot, vl_release, bias, /) -> None\n"
"\n"
"Recompute a node's record `agg` from its children's records and its own evaluation (corrected\n"
"by its subtree value bias bucket `bias`, None for none), then copy it into its parent's record\n"
"`slot` (all fields but the virtual losses, which drop by `vl_release`). `parent_st` None: the\n"
"root, no parent. kosumi.engine.puct documents the rule.");

static PyObject *
update_node(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer stv, prv, ownv, parv, aggv, pstv, biasv;
    Py_ssize_t k, r, i, j, npst = 0, slot = 0, ngood = 0;
    double sc[2], sign, vl_release;
    const double *st, *pr, *p;
    double *own, *agg, *pst = NULL, *bias = NULL;
    double wbuf[STACK_CHILDREN], ubuf[STACK_CHILDREN];
    Py_ssize_t ibuf[STACK_CHILDREN];
    double *wa = wbuf, *su = ubuf;
    Py_ssize_t *idx = ibuf;
    double orig_tw = 0.0, cur_tw, visits = 0.0;
    double s_wl = 0.0, s_sm = 0.0, s_sm2 = 0.0, s_ld = 0.0, s_u = 0.0, s_u2 = 0.0, s_w2 = 0.0;
    double ow, ou, wsum;
    int have_parent, have_bias;
    PyObject *result = NULL;
    (void)self;

    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "update_node() takes exactly 10 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    have_bias = args[9] != Py_None;
    sign = PyFloat_AsDouble(args[4]);
    if (sign == -1.0 && PyErr_Occurred())
        return NULL;
    have_parent = args[6] != Py_None;
    if (have_parent) {
        slot = PyLong_AsSsize_t(args[7]);
        if (slot == -1 && PyErr_Occurred())
            return NULL;
    }
    if (as_doubles(args + 8, sc, 1) < 0)
        return NULL;
    vl_release = sc[0];

    if (child_buffers(args[0], args[1], &stv, &prv, &k, &r, 0) < 0)
        return NULL;
    if (f64_buffer(args[2], &ownv, NOWN, NULL, 1, "own") < 0)
        goto fail_own;
    if (f64_buffer(args[3], &parv, NPARAMS, NULL, 0, "params") < 0)
        goto fail_par;
    if (f64_buffer(args[5], &aggv, NF, NULL, 1, "agg") < 0)
        goto fail_agg;
    if (have_parent) {
        if (f64_buffer(args[6], &pstv, -1, &npst, 1, "parent_st") < 0)
            goto fail_pst;
        if (slot < 0 || (slot + 1) * NF > npst) {
            PyErr_Format(PyExc_ValueError, "slot %zd is outside parent_st (%zd children)", slot,
                         npst / NF);
            goto done;
        }
        pst = (double *)pstv.buf + slot * NF;
    }
    if (have_bias) {
        if (f64_buffer(args[9], &biasv, NBIAS, NULL, 1, "bias") < 0)
            goto done;
        bias = (double *)biasv.buf;
    }
    st = (const double *)stv.buf;
    pr = (const double *)prv.buf;
    own = (double *)ownv.buf;
    p = (const double *)parv.buf;
    agg = (double *)aggv.buf;

    if (r > STACK_CHILDREN) {
        wa = (double *)PyMem_Malloc((size_t)r * sizeof(double));
        su = (double *)PyMem_Malloc((size_t)r * sizeof(double));
        idx = (Py_ssize_t *)PyMem_Malloc((size_t)r * sizeof(Py_ssize_t));
        if (wa == NULL || su == NULL || idx == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }

    /* the children with completed visits, in index order (the node's children are sorted by
       prior, highest first) */
    for (i = 0; i < r; i++) {
        const double *c = st + i * NF;
        if (c[F_N] <= 0.0 || c[F_W] <= 0.0)
            continue;
        idx[ngood] = i;
        su[ngood] = sign * c[F_U];
        wa[ngood] = c[F_W];
        orig_tw += c[F_W];
        visits += c[F_N];
        ngood++;
    }
    cur_tw = orig_tw;

    /* noise pruning: a child worse than the weighted average of those before it (in prior
       order) keeps at most twice its raw-policy share of the weight, minus a part of the
       excess that grows with how much worse it is */
    if (p[P_NOISE_PRUNE] != 0.0 && ngood > 1 && orig_tw > 0.00001) {
        double u_so_far = 0.0, w_so_far = 0.0, pol_so_far = 0.0;
        for (j = 0; j < ngood; j++) {
            const double u = su[j];
            const double old_w = wa[j];
            const double raw = pr[idx[j]] > 1e-30 ? pr[idx[j]] : 1e-30;
            double new_w = old_w;
            if (w_so_far > 0.0 && pol_so_far > 0.0) {
                const double gap = u_so_far / w_so_far - u;
                if (gap > 0.0) {
                    const double lenient = 2.0 * (w_so_far * raw / pol_so_far);
                    if (old_w > lenient) {
                        const double excess = old_w - lenient;
                        new_w = old_w - excess * (1.0 - exp(-gap / p[P_NOISE_SCALE]));
                        wa[j] = new_w;
                    }
                }
            }
            u_so_far += u * new_w;
            w_so_far += new_w;
            pol_so_far += raw;
        }
        cur_tw = w_so_far;
    }

    /* value weighting: children whose value is far below the weighted average lose weight, by
       the t(3) CDF of their z score to the power value_weight_exponent; renormalised to keep
       the total */
    if (p[P_VALUE_WEIGHT_EXP] != 0.0 && ngood > 0 && cur_tw > 0.0) {
        double simple = 0.0, total = 0.0, scale;
        for (j = 0; j < ngood; j++)
            simple += su[j] * wa[j];
        simple = simple / cur_tw;
        for (j = 0; j < ngood; j++) {
            const double precision = 1.5 * sqrt(wa[j]);
            const double stdev = sqrt(0.00000001 + 1.0 / precision);
            const double z = (su[j] - simple) / stdev;
            const double cdf = t3_cdf(z) + 0.0001;
            wa[j] = wa[j] * pow(cdf, p[P_VALUE_WEIGHT_EXP]);
            total += wa[j];
        }
        scale = cur_tw / total;
        for (j = 0; j < ngood; j++)
            wa[j] = wa[j] * scale;
    }

    for (j = 0; j < ngood; j++) {
        const double *c = st + idx[j] * NF;
        const double w = wa[j];
        const double ws = w / c[F_W];
        s_wl += w * c[F_WL];
        s_sm += w * c[F_SM];
        s_sm2 += w * c[F_SM2];
        s_ld += w * c[F_LD];
        s_u += w * c[F_U];
        s_u2 += w * c[F_U2];
        s_w2 += ws * ws * c[F_W2];
    }
    ow = own[O_W];
    ou = own[O_U];
    /* subtree value bias: the node's children disagree with its own evaluation by some delta;
       its bucket keeps the weighted average delta of its nodes (this node's last share replaced
       by the new one), and the node's own utility moves by bias_factor times that average */
    if (bias != NULL && p[P_BIAS_FACTOR] != 0.0) {
        if (cur_tw > 1e-10) {
            const double bw = pow(orig_tw, p[P_BIAS_EXP]);
            const double delta = (s_u / cur_tw - ou) * bw;
            bias[B_DELTA] += delta - own[O_BIAS_DELTA];
            bias[B_WEIGHT] += bw - own[O_BIAS_WEIGHT];
            own[O_BIAS_DELTA] = delta;
            own[O_BIAS_WEIGHT] = bw;
        }
        if (bias[B_WEIGHT] > 0.001)
            ou = ou + p[P_BIAS_FACTOR] * bias[B_DELTA] / bias[B_WEIGHT];
    }
    s_wl += own[O_WL] * ow;
    s_sm += own[O_SM] * ow;
    s_sm2 += own[O_SM2] * ow;
    s_ld += own[O_LD] * ow;
    s_u += ou * ow;
    s_u2 += ou * ou * ow;
    s_w2 += ow * ow;
    wsum = cur_tw + ow;

    agg[F_N] = visits + 1.0;
    agg[F_W] = wsum;
    agg[F_W2] = s_w2;
    agg[F_U] = s_u / wsum;
    agg[F_U2] = s_u2 / wsum;
    agg[F_WL] = s_wl / wsum;
    agg[F_SM] = s_sm / wsum;
    agg[F_SM2] = s_sm2 / wsum;
    agg[F_LD] = s_ld / wsum;
    if (pst != NULL) {
        const double vl = pst[F_VL] - vl_release;
        for (j = 0; j < NF; j++)
            pst[j] = agg[j];
        pst[F_VL] = vl;
    }
    agg[F_VL] = 0.0;
    Py_INCREF(Py_None);
    result = Py_None;

done:
    if (bias != NULL)
        PyBuffer_Release(&biasv);
    if (wa != wbuf)
        PyMem_Free(wa);
    if (su != ubuf)
        PyMem_Free(su);
    if (idx != ibuf)
        PyMem_Free(idx);
    if (have_parent)
        PyBuffer_Release(&pstv);
fail_pst:
    PyBuffer_Release(&aggv);
fail_agg:
    PyBuffer_Release(&parv);
fail_par:
    PyBuffer_Release(&ownv);
fail_own:
    PyBuffer_Release(&stv);
    PyBuffer_Release(&prv);
    return result;
}

/* ------------------------------------------------------------------------------------------ */

static PyMethodDef puct_methods[] = {
    {"children", (PyCFunction)(void (*)(void))children, METH_FASTCALL, children_doc},
    {"score_utility", (PyCFunction)(void (*)(void))score_utility, METH_FASTCALL,
     score_utility_doc},
    {"select_child", (PyCFunction)(void (*)(void))select_child, METH_FASTCALL, select_child_doc},
    {"update_node", (PyCFunction)(void (*)(void))update_node, METH_FASTCALL, update_node_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot puct_slots[] = {
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef puct_module = {
    PyModuleDef_HEAD_INIT, "kosumi.engine._puct",
    "C versions of the search's per-node rules (see kosumi.engine.puct).", 0, puct_methods,
    puct_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__puct(void)
{
    init_grid();
    return PyModuleDef_Init(&puct_module);
}
