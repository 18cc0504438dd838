/*
 * kosumi._speedups: C versions of the search's hot spots (see kosumi/accel.py, the Python front
 * that falls back to exact numpy/Python versions when this module is not built).
 *
 *   legal_mask(board, size, color, ko, suicide_allowed, out=None)   -> bytes | out
 *   chain_liberties(board, size, out=None)                           -> bytes | out
 *   area_ownership(board, size, out=None)                            -> bytes | out
 *   basic_planes(board, size, color, ko, moves, out, /)              -> out
 *   masked_softmax(logits, legal, row, out, /)                       -> out
 *
 * Boards are C-contiguous buffers of size*size one-byte items (bytes, bytearray, numpy uint8 /
 * int8 / bool arrays), row-major from the top-left, 0 empty / 1 black / 2 white, 2 <= size <= 19.
 * Results are N*N one-byte values, returned as a new `bytes` object, or written into `out` (any
 * writable C-contiguous buffer of N*N one-byte items, e.g. np.empty(N*N, np.bool_)), which is
 * then returned. `out` may even be the board itself: the board is copied before writing.
 *
 * No global mutable state: every call works on its own stack arrays (at most a few KiB), so the
 * functions are reentrant and thread-safe. Bad arguments raise ValueError (TypeError for objects
 * that are not buffers at all).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

#define MIN_SIZE 2
#define MAX_SIZE 19
#define PAD_W (MAX_SIZE + 2)        /* padded row width for the largest board */
#define PAD_N (PAD_W * PAD_W)       /* padded board points */
#define BORDER 3                    /* padded-board value of off-board points */

/* ------------------------------------------------------------------------------------------ */
/* buffer helpers                                                                              */
/* ------------------------------------------------------------------------------------------ */

/* Get a C-contiguous buffer of one-byte items of exactly `len` bytes. */
static int
get_byte_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t len, int writable, const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        if (PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s must be a %sC-contiguous buffer", name,
                         writable ? "writable " : "");
        }
        return -1;
    }
    if (view->itemsize != 1 || view->len != len) {
        PyErr_Format(PyExc_ValueError,
                     "%s must hold %zd one-byte items (got %zd bytes, itemsize %zd)",
                     name, len, view->len, view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Fast-call arguments: exactly `want` of them, else TypeError. */
static int
check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t want)
{
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s() takes exactly %zd arguments (%zd given)", name, want,
                     nargs);
        return -1;
    }
    return 0;
}

/* args[0..n) as C longs (into `ints`) or, with ints NULL, doubles (into `reals`); -1 with the
 * Python error set when one does not convert. */
static int
as_numbers(PyObject *const *args, long *ints, double *reals, int n)
{
    int i;
    for (i = 0; i < n; i++) {
        const double v = ints ? (double)(ints[i] = PyLong_AsLong(args[i]))
                              : (reals[i] = PyFloat_AsDouble(args[i]));
        if (v == -1.0 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

static int
check_size(int size)
{
    if (size < MIN_SIZE || size > MAX_SIZE) {
        PyErr_Format(PyExc_ValueError, "board size %d is not supported (use %d..%d)", size,
                     MIN_SIZE, MAX_SIZE);
        return -1;
    }
    return 0;
}

/* Result holder: either a new bytes object or the caller's `out` buffer. */
typedef struct {
    PyObject *obj;      /* new reference to return */
    Py_buffer view;     /* valid when has_view */
    int has_view;
    unsigned char *data;
} result_t;

static int
result_open(result_t *r, PyObject *out, Py_ssize_t len)
{
    r->has_view = 0;
    if (out == NULL || out == Py_None) {
        r->obj = PyBytes_FromStringAndSize(NULL, len);
        if (r->obj == NULL)
            return -1;
        r->data = (unsigned char *)PyBytes_AS_STRING(r->obj);
        return 0;
    }
    if (get_byte_buffer(out, &r->view, len, 1, "out") < 0)
        return -1;
    r->has_view = 1;
    r->data = (unsigned char *)r->view.buf;
    Py_INCREF(out);
    r->obj = out;
    return 0;
}

static PyObject *
result_close(result_t *r)
{
    if (r->has_view)
        PyBuffer_Release(&r->view);
    return r->obj;
}

/* ------------------------------------------------------------------------------------------ */
/* padded board                                                                                */
/* ------------------------------------------------------------------------------------------ */

/*
 * The board is copied into a (size+2) x (size+2) array with BORDER all around, so that the four
 * neighbours of a padded point P are P-1, P+1, P-W, P+W without bounds checks. Point p = y*size+x
 * maps to P = (y+1)*W + (x+1). Returns -1 with ValueError on a value other than 0, 1, 2.
 */
typedef struct {
    int size, w;
    unsigned char b[PAD_N];
} padded_t;

static int
pad_board(padded_t *pb, const unsigned char *src, int size)
{
    const int w = size + 2;
    int x, y;
    pb->size = size;
    pb->w = w;
    memset(pb->b, BORDER, (size_t)(w * w));
    for (y = 0; y < size; y++) {
        const unsigned char *row = src + y * size;
        unsigned char *dst = pb->b + (y + 1) * w + 1;
        for (x = 0; x < size; x++) {
            if (row[x] > 2) {
                PyErr_Format(PyExc_ValueError,
                             "board values must be 0 (empty), 1 (black) or 2 (white); "
                             "got %d at point %d", (int)row[x], y * size + x);
                return -1;
            }
            dst[x] = row[x];
        }
    }
    return 0;
}

#define PAD(pb, p) (((p) / (pb)->size + 1) * (pb)->w + (p) % (pb)->size + 1)

/*
 * Flood-fill the chain through padded point P (a stone): label its stones with `id` in `cid`
 * and return its number of distinct liberties, counting only up to 2 (0, 1 or 2 = "two or more").
 * `stack` needs room for every point of the board.
 */
static int
chain_libs_upto2(const padded_t *pb, int P, short id, short *cid, short *stack)
{
    const unsigned char *b = pb->b;
    const unsigned char c = b[P];
    const int d[4] = {-1, 1, -pb->w, pb->w};
    int top = 0, nlibs = 0, lib1 = -1, k;
    cid[P] = id;
    stack[top++] = (short)P;
    while (top > 0) {
        const int S = stack[--top];
        for (k = 0; k < 4; k++) {
            const int Q = S + d[k];
            const unsigned char cq = b[Q];
            if (cq == 0) {
                if (nlibs == 0) {
                    nlibs = 1;
                    lib1 = Q;
                } else if (nlibs == 1 && Q != lib1) {
                    nlibs = 2;
                }
            } else if (cq == c && cid[Q] == 0) {
                cid[Q] = id;
                stack[top++] = (short)Q;
            }
        }
    }
    return nlibs;
}

/* ------------------------------------------------------------------------------------------ */
/* legal_mask                                                                                  */
/* ------------------------------------------------------------------------------------------ */

PyDoc_STRVAR(legal_mask_doc,
"legal_mask(board, size, color, ko, suicide_allowed, out=None) -> bytes | out\n\n"
"1 at the points where `color` (1 black, 2 white) may play under simple-ko rules, else 0:\n"
"the point is empty, is not `ko` (-1: no ko ban for `color`) and is not suicide. A move is not\n"
"suicide if it has an empty neighbour, joins an own chain with another liberty or captures an\n"
"opponent chain. With `suicide_allowed`, multi-stone suicide is legal; single-stone suicide\n"
"never is. Positional superko is not checked. Returns new bytes of N*N, or fills `out`.");

static PyObject *
legal_mask(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"board", "size", "color", "ko", "suicide_allowed", "out", NULL};
    PyObject *board_obj, *out = NULL;
    int size, color, suicide_allowed;
    Py_ssize_t ko;
    Py_buffer bv;
    padded_t pb;
    short cid[PAD_N];          /* chain id per padded point, 0 = not labelled yet */
    unsigned char clibs[PAD_N];/* liberties (capped at 2) per chain id */
    short stack[PAD_N];
    short next_id = 1;
    result_t res;
    int x, y, nn;
    (void)self;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oiinp|O:legal_mask", kwlist, &board_obj,
                                     &size, &color, &ko, &suicide_allowed, &out))
        return NULL;
    if (check_size(size) < 0)
        return NULL;
    nn = size * size;
    if (color != 1 && color != 2) {
        PyErr_Format(PyExc_ValueError, "color must be 1 (black) or 2 (white), not %d", color);
        return NULL;
    }
    if (ko < -1 || ko >= nn) {
        PyErr_Format(PyExc_ValueError, "ko must be -1 or a point in 0..%d, not %zd", nn - 1, ko);
        return NULL;
    }
    if (get_byte_buffer(board_obj, &bv, nn, 0, "board") < 0)
        return NULL;
    if (pad_board(&pb, (const unsigned char *)bv.buf, size) < 0) {
        PyBuffer_Release(&bv);
        return NULL;
    }
    PyBuffer_Release(&bv);  /* everything below reads the private copy */
    if (result_open(&res, out, nn) < 0)
        return NULL;

    memset(cid, 0, sizeof(cid));
    {
        const unsigned char *b = pb.b;
        const int w = pb.w;
        const int d[4] = {-1, 1, -w, w};
        const unsigned char opp = (unsigned char)(3 - color);
        unsigned char *o = res.data;
        for (y = 0; y < size; y++) {
            for (x = 0; x < size; x++) {
                const int p = y * size + x, P = (y + 1) * w + x + 1;
                int legal = 0, own_nb = 0, k;
                if (b[P] != 0 || p == ko) {
                    o[p] = 0;
                    continue;
                }
                if (b[P - 1] == 0 || b[P + 1] == 0 || b[P - w] == 0 || b[P + w] == 0) {
                    o[p] = 1;  /* an empty neighbour: a liberty of its own */
                    continue;
                }
                /* Surrounded by stones and border: look at the neighbouring chains. */
                for (k = 0; k < 4 && !legal; k++) {
                    const int Q = P + d[k];
                    const unsigned char c = b[Q];
                    int libs;
                    if (c == BORDER)
                        continue;
                    if (cid[Q] == 0) {
                        clibs[next_id] = (unsigned char)chain_libs_upto2(&pb, Q, next_id, cid,
                                                                        stack);
                        next_id++;
                    }
                    libs = clibs[cid[Q]];  /* P itself is one of them */
                    if (c == color) {
                        own_nb = 1;
                        legal = libs >= 2;     /* the own chain keeps another liberty */
                    } else if (c == opp) {
                        legal = libs == 1;     /* the opponent chain is captured */
                    }
                }
                if (!legal && suicide_allowed && own_nb)
                    legal = 1;                 /* multi-stone suicide */
                o[p] = (unsigned char)legal;
            }
        }
    }
    return result_close(&res);
}

/* ------------------------------------------------------------------------------------------ */
/* chain_liberties                                                                             */
/* ------------------------------------------------------------------------------------------ */

/*
 * For each stone, the number of distinct liberties of its chain (capped at 255), 0 at empty
 * points, written to dst[0..nn). One BFS per chain; a few KiB of stack.
 */
static void
fill_chain_liberties(const padded_t *pb, unsigned char *dst)
{
    const unsigned char *b = pb->b;
    const int size = pb->size, w = pb->w;
    const int d[4] = {-1, 1, -w, w};
    short cid[PAD_N];      /* chain id per padded point, 0 = not labelled yet */
    short libmark[PAD_N];  /* id of the last chain that counted this empty point */
    short queue[PAD_N];    /* stones of the current chain (BFS queue = stone list) */
    unsigned char plibs[PAD_N];  /* the answer per padded point */
    short next_id = 1;
    int x, y;

    memset(cid, 0, sizeof(short) * (size_t)(w * w));
    memset(libmark, 0, sizeof(short) * (size_t)(w * w));
    memset(plibs, 0, (size_t)(w * w));
    for (y = 0; y < size; y++) {
        for (x = 0; x < size; x++) {
            const int P = (y + 1) * w + x + 1;
            const unsigned char c = b[P];
            int head = 0, tail = 0, nlibs = 0, i, k;
            if (c == 0 || cid[P] != 0)
                continue;
            cid[P] = next_id;
            queue[tail++] = (short)P;
            while (head < tail) {
                const int S = queue[head++];
                for (k = 0; k < 4; k++) {
                    const int Q = S + d[k];
                    const unsigned char cq = b[Q];
                    if (cq == 0) {
                        if (libmark[Q] != next_id) {
                            libmark[Q] = next_id;
                            nlibs++;
                        }
                    } else if (cq == c && cid[Q] == 0) {
                        cid[Q] = next_id;
                        queue[tail++] = (short)Q;
                    }
                }
            }
            if (nlibs > 255)
                nlibs = 255;
            for (i = 0; i < tail; i++)
                plibs[queue[i]] = (unsigned char)nlibs;
            next_id++;
        }
    }
    for (y = 0; y < size; y++)
        memcpy(dst + y * size, plibs + (y + 1) * w + 1, (size_t)size);
}

PyDoc_STRVAR(chain_liberties_doc,
"chain_liberties(board, size, out=None) -> bytes | out\n\n"
"For each stone, the number of distinct liberties of its chain (capped at 255); 0 at empty\n"
"points. Returns new bytes of N*N, or fills `out`.");

static PyObject *
chain_liberties(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"board", "size", "out", NULL};
    PyObject *board_obj, *out = NULL;
    int size, nn;
    Py_buffer bv;
    padded_t pb;
    result_t res;
    (void)self;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oi|O:chain_liberties", kwlist, &board_obj,
                                     &size, &out))
        return NULL;
    if (check_size(size) < 0)
        return NULL;
    nn = size * size;
    if (get_byte_buffer(board_obj, &bv, nn, 0, "board") < 0)
        return NULL;
    if (pad_board(&pb, (const unsigned char *)bv.buf, size) < 0) {
        PyBuffer_Release(&bv);
        return NULL;
    }
    PyBuffer_Release(&bv);
    if (result_open(&res, out, nn) < 0)
        return NULL;
    fill_chain_liberties(&pb, res.data);
    return result_close(&res);
}

/* ------------------------------------------------------------------------------------------ */
/* basic_planes                                                                                */
/* ------------------------------------------------------------------------------------------ */

PyDoc_STRVAR(basic_planes_doc,
"basic_planes(board, size, color, ko, moves, out, /) -> out\n\n"
"The 11 planes of the `basic` feature set for `color` (1 black, 2 white) to move, written into\n"
"`out`, a writable C-contiguous float32 buffer of 11*N*N items: 0 on board (ones), 1 `color`'s\n"
"stones, 2 the opponent's stones, 3/4/5 stones whose chain has exactly 1, exactly 2, and 3 or\n"
"more liberties, 6 the ko point `ko` (-1: none), 7-10 the points of the last 4 of `moves` (a\n"
"list or tuple of (colour, point) pairs, newest last; a negative point is a pass: no mark).");

#define BASIC_PLANES 11
#define BASIC_LAST_MOVES 4

static PyObject *
basic_planes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer bv, ov;
    padded_t pb;
    unsigned char libs[MAX_SIZE * MAX_SIZE];
    const unsigned char *board;
    float *o;
    long ints[3], size, color, ko;  /* size, color, ko */
    int nn, p, marks[1 + BASIC_LAST_MOVES];
    Py_ssize_t nmoves, k;
    PyObject *seq;
    (void)self;

    if (check_nargs("basic_planes", nargs, 6) < 0 || as_numbers(args + 1, ints, NULL, 3) < 0)
        return NULL;
    size = ints[0];
    color = ints[1];
    ko = ints[2];
    if (check_size((int)size) < 0)
        return NULL;
    nn = (int)(size * size);
    if (color != 1 && color != 2) {
        PyErr_Format(PyExc_ValueError, "color must be 1 (black) or 2 (white), not %ld", color);
        return NULL;
    }
    if (ko < -1 || ko >= nn) {
        PyErr_Format(PyExc_ValueError, "ko must be -1 or a point in 0..%d, not %ld", nn - 1, ko);
        return NULL;
    }
    marks[0] = (int)ko;
    /* the last moves' points (newest first), read before anything is written */
    seq = PySequence_Fast(args[4], "moves must be a list or tuple of (colour, point) pairs");
    if (seq == NULL)
        return NULL;
    nmoves = PySequence_Fast_GET_SIZE(seq);
    for (k = 0; k < BASIC_LAST_MOVES; k++) {
        PyObject *item, *point;
        long v;
        marks[1 + k] = -1;
        if (k >= nmoves)
            continue;
        item = PySequence_Fast_GET_ITEM(seq, nmoves - 1 - k);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_ValueError, "moves must hold (colour, point) tuples");
            Py_DECREF(seq);
            return NULL;
        }
        point = PyTuple_GET_ITEM(item, 1);
        v = PyLong_AsLong(point);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        if (v >= nn) {
            PyErr_Format(PyExc_ValueError, "move point %ld is off a %ldx%ld board", v, size, size);
            Py_DECREF(seq);
            return NULL;
        }
        marks[1 + k] = v < 0 ? -1 : (int)v;
    }
    Py_DECREF(seq);

    if (get_byte_buffer(args[0], &bv, nn, 0, "board") < 0)
        return NULL;
    if (pad_board(&pb, (const unsigned char *)bv.buf, (int)size) < 0) {
        PyBuffer_Release(&bv);
        return NULL;
    }
    if (PyObject_GetBuffer(args[5], &ov, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&bv);
        if (PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "out must be a writable C-contiguous buffer");
        }
        return NULL;
    }
    if (ov.itemsize != 4 || ov.format == NULL || strcmp(ov.format, "f") != 0 ||
        ov.len != (Py_ssize_t)(BASIC_PLANES * nn) * 4) {
        PyErr_Format(PyExc_ValueError, "out must be a float32 buffer of %d items",
                     BASIC_PLANES * nn);
        PyBuffer_Release(&ov);
        PyBuffer_Release(&bv);
        return NULL;
    }
    board = (const unsigned char *)bv.buf;
    o = (float *)ov.buf;
    fill_chain_liberties(&pb, libs);
    {
        /* table lookups, not branches: stones and liberty counts are unpredictable */
        const float mine[3] = {0.0f, color == 1 ? 1.0f : 0.0f, color == 2 ? 1.0f : 0.0f};
        const float theirs[3] = {0.0f, mine[2], mine[1]};
        const float lib1[4] = {0.0f, 1.0f, 0.0f, 0.0f};
        const float lib2[4] = {0.0f, 0.0f, 1.0f, 0.0f};
        const float lib3[4] = {0.0f, 0.0f, 0.0f, 1.0f};
        for (p = 0; p < nn; p++) {
            const unsigned char c = board[p];
            const unsigned char l = libs[p] < 3 ? libs[p] : 3;
            o[p] = 1.0f;
            o[nn + p] = mine[c];
            o[2 * nn + p] = theirs[c];
            o[3 * nn + p] = lib1[l];
            o[4 * nn + p] = lib2[l];
            o[5 * nn + p] = lib3[l];
        }
    }
    memset(o + 6 * nn, 0, sizeof(float) * (size_t)(5 * nn));
    for (k = 0; k < 1 + BASIC_LAST_MOVES; k++)
        if (marks[k] >= 0)
            o[(6 + k) * nn + marks[k]] = 1.0f;
    PyBuffer_Release(&ov);
    PyBuffer_Release(&bv);
    Py_INCREF(args[5]);
    return args[5];
}

/* ------------------------------------------------------------------------------------------ */
/* area_ownership                                                                              */
/* ------------------------------------------------------------------------------------------ */

PyDoc_STRVAR(area_ownership_doc,
"area_ownership(board, size, out=None) -> bytes | out\n\n"
"Tromp-Taylor owner of each point: the stone's colour on a stone; on an empty point, 1 or 2\n"
"when its empty region touches stones of that colour only, else 0 (dame / neutral). Returns\n"
"new bytes of N*N, or fills `out`.");

static PyObject *
area_ownership(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"board", "size", "out", NULL};
    PyObject *board_obj, *out = NULL;
    int size, nn, p;
    Py_buffer bv;
    padded_t pb;
    unsigned char seen[PAD_N];
    short queue[PAD_N];    /* points of the current empty region */
    result_t res;
    (void)self;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oi|O:area_ownership", kwlist, &board_obj,
                                     &size, &out))
        return NULL;
    if (check_size(size) < 0)
        return NULL;
    nn = size * size;
    if (get_byte_buffer(board_obj, &bv, nn, 0, "board") < 0)
        return NULL;
    if (pad_board(&pb, (const unsigned char *)bv.buf, size) < 0) {
        PyBuffer_Release(&bv);
        return NULL;
    }
    PyBuffer_Release(&bv);
    if (result_open(&res, out, nn) < 0)
        return NULL;

    memset(seen, 0, sizeof(seen));
    {
        const unsigned char *b = pb.b;
        const int w = pb.w;
        const int d[4] = {-1, 1, -w, w};
        for (p = 0; p < nn; p++) {
            const int P = PAD(&pb, p);
            int head = 0, tail = 0, borders = 0, i, k;
            unsigned char owner;
            if (b[P] != 0) {
                res.data[p] = b[P];
                continue;
            }
            if (seen[P])
                continue;  /* already written with its region */
            seen[P] = 1;
            queue[tail++] = (short)P;
            while (head < tail) {
                const int S = queue[head++];
                for (k = 0; k < 4; k++) {
                    const int Q = S + d[k];
                    const unsigned char cq = b[Q];
                    if (cq == 0) {
                        if (!seen[Q]) {
                            seen[Q] = 1;
                            queue[tail++] = (short)Q;
                        }
                    } else if (cq != BORDER) {
                        borders |= cq;
                    }
                }
            }
            owner = (unsigned char)((borders == 1 || borders == 2) ? borders : 0);
            for (i = 0; i < tail; i++) {
                const int S = queue[i];
                res.data[(S / w - 1) * size + S % w - 1] = owner;
            }
        }
    }
    return result_close(&res);
}

/* ------------------------------------------------------------------------------------------ */
/* masked_softmax                                                                              */
/* ------------------------------------------------------------------------------------------ */

PyDoc_STRVAR(masked_softmax_doc,
"masked_softmax(logits, legal, row, out, /) -> out\n\n"
"Softmax over each row of `row` entries, restricted to the legal ones: `logits` a C-contiguous\n"
"float32 buffer of R*row items, `legal` a C-contiguous buffer of as many one-byte items\n"
"(nonzero = legal; e.g. a numpy bool array), `out` a writable float32 buffer of R*row items\n"
"(it may be `logits`). Illegal entries get exactly 0. float32 like the numpy version (the row's\n"
"largest legal logit subtracted, expf, divided by the row sum, which is summed in double).\n"
"A row without a legal entry is a ValueError.");

static int
get_f32_buffer(PyObject *obj, Py_buffer *view, int writable, const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        if (PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s must be a %sC-contiguous float32 buffer", name,
                         writable ? "writable " : "");
        }
        return -1;
    }
    if (view->itemsize != 4 || view->format == NULL || strcmp(view->format, "f") != 0) {
        PyErr_Format(PyExc_ValueError, "%s must be a float32 buffer", name);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *
masked_softmax(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer lv, mv, ov;
    Py_ssize_t n, rows, k, r, i;
    PyObject *result = NULL;
    (void)self;

    if (check_nargs("masked_softmax", nargs, 4) < 0)
        return NULL;
    k = PyLong_AsSsize_t(args[2]);
    if (k == -1 && PyErr_Occurred())
        return NULL;
    if (k < 1) {
        PyErr_Format(PyExc_ValueError, "row must be at least 1, not %zd", k);
        return NULL;
    }
    if (get_f32_buffer(args[0], &lv, 0, "logits") < 0)
        return NULL;
    n = lv.len / 4;
    if (get_byte_buffer(args[1], &mv, n, 0, "legal") < 0) {
        PyBuffer_Release(&lv);
        return NULL;
    }
    if (get_f32_buffer(args[3], &ov, 1, "out") < 0) {
        PyBuffer_Release(&mv);
        PyBuffer_Release(&lv);
        return NULL;
    }
    if (ov.len != lv.len || n % k != 0) {
        PyErr_Format(PyExc_ValueError, "out must hold as many floats as logits (%zd, got %zd), "
                     "a whole number of rows of %zd", n, ov.len / 4, k);
        goto done;
    }
    rows = n / k;
    {
        const float *x = (const float *)lv.buf;
        const unsigned char *m = (const unsigned char *)mv.buf;
        float *o = (float *)ov.buf;
        for (r = 0; r < rows; r++) {
            const float *xr = x + r * k;
            const unsigned char *mr = m + r * k;
            float *orow = o + r * k;
            float mx = 0.0f;
            double sum = 0.0;
            float scale;
            int any = 0;
            for (i = 0; i < k; i++)
                if (mr[i] && (!any || xr[i] > mx)) {
                    mx = xr[i];
                    any = 1;
                }
            if (!any) {
                PyErr_Format(PyExc_ValueError, "masked_softmax: row %zd has no legal entry", r);
                goto done;
            }
            for (i = 0; i < k; i++) {
                const float ex = mr[i] ? expf(xr[i] - mx) : 0.0f;
                orow[i] = ex;
                sum += ex;
            }
            scale = (float)(1.0 / sum);
            for (i = 0; i < k; i++)
                orow[i] *= scale;
        }
    }
    Py_INCREF(args[3]);
    result = args[3];
done:
    PyBuffer_Release(&ov);
    PyBuffer_Release(&mv);
    PyBuffer_Release(&lv);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* area_map: Benson's pass-alive analysis for both colours, KataGo's area (go/benson.py)       */
/* ------------------------------------------------------------------------------------------ */

PyDoc_STRVAR(area_map_doc,
"area_map(board, size, suicide_legal, /) -> bytes\n\n"
"KataGo's area of each point (1 black, 2 white, 0 neither), exactly as kosumi.go.benson's\n"
"Python version: for Black then White, Benson's pass-alive chains and territory, the empty\n"
"regions bordered only by the colour where nothing claimed them, then every unmarked stone.");

#define AM_N (MAX_SIZE * MAX_SIZE)

typedef struct {
    int nn, size;
    const unsigned char *b;
    int nb[AM_N][4];
    int nnb[AM_N];
    int chain_of[AM_N], region_of[AM_N];
    int chain_start[AM_N + 1], chain_stones[AM_N];  /* stones of chain c: [start[c], start[c+1]) */
    int region_start[AM_N + 1], region_pts[AM_N];
    int vital[AM_N][4], nvital[AM_N];               /* the chains a region is vital to (<= 4) */
    int internal[AM_N], has_opp[AM_N];
    int count[AM_N], killed[AM_N], bad[AM_N];
    int nchains, nregions;
} benson_t;

static void
benson_neighbours(benson_t *t)
{
    int p, size = t->size;
    for (p = 0; p < t->nn; p++) {
        int y = p / size, x = p % size, k = 0;
        if (y > 0) t->nb[p][k++] = p - size;
        if (y < size - 1) t->nb[p][k++] = p + size;
        if (x > 0) t->nb[p][k++] = p - 1;
        if (x < size - 1) t->nb[p][k++] = p + 1;
        t->nnb[p] = k;
    }
}

/* Benson for colour `pla`; fills the chains, regions and killed/bad flags. 0 if no chain. */
static int
benson_analyse(benson_t *t, int pla, int suicide_legal)
{
    const unsigned char *b = t->b;
    int nn = t->nn, opp = 3 - pla, p, i, k, n = 0, changed;

    t->nchains = t->nregions = 0;
    for (p = 0; p < nn; p++)
        t->chain_of[p] = t->region_of[p] = -1;
    for (p = 0; p < nn; p++) {                      /* pla's chains (flood fill, in order) */
        int start;
        if (b[p] != pla || t->chain_of[p] >= 0)
            continue;
        start = n;
        t->chain_start[t->nchains] = start;
        t->chain_stones[n++] = p;
        t->chain_of[p] = t->nchains;
        for (i = start; i < n; i++) {
            int s = t->chain_stones[i];
            for (k = 0; k < t->nnb[s]; k++) {
                int q = t->nb[s][k];
                if (b[q] == pla && t->chain_of[q] < 0) {
                    t->chain_of[q] = t->nchains;
                    t->chain_stones[n++] = q;
                }
            }
        }
        t->nchains++;
    }
    t->chain_start[t->nchains] = n;
    if (!t->nchains)
        return 0;
    n = 0;
    for (p = 0; p < nn; p++) {  /* regions: seeded at empty points, through empty and opp */
        int rid = t->nregions, start = n, cand[4], ncand = 0, n_internal = 0, opp_inside = 0;
        if (b[p] != 0 || t->region_of[p] >= 0)
            continue;
        t->region_start[rid] = start;
        t->region_pts[n++] = p;
        t->region_of[p] = rid;
        for (k = 0; k < t->nnb[p]; k++) {           /* the chains next to the seed */
            int c = t->chain_of[t->nb[p][k]], j, dup = 0;
            if (c < 0) continue;
            for (j = 0; j < ncand; j++) dup |= cand[j] == c;
            if (!dup) cand[ncand++] = c;
        }
        for (i = start; i < n; i++) {
            int s = t->region_pts[i], touches = 0;
            for (k = 0; k < t->nnb[s]; k++) {
                int q = t->nb[s][k];
                if (b[q] == pla)
                    touches = 1;
                else if (t->region_of[q] < 0) {
                    t->region_of[q] = rid;
                    t->region_pts[n++] = q;
                }
            }
            if (b[s] == opp) opp_inside = 1;
            if (!touches) n_internal++;
            if (ncand && (suicide_legal || b[s] == 0)) {
                /* vital only to chains next to every (empty) point of the region */
                int j, keep = 0;
                if (touches) {
                    for (j = 0; j < ncand; j++) {
                        int m, next = 0;
                        for (m = 0; m < t->nnb[s]; m++)
                            next |= t->chain_of[t->nb[s][m]] == cand[j];
                        if (next) cand[keep++] = cand[j];
                    }
                }
                ncand = keep;
            }
        }
        /* sorted, as the Python version's sorted(cand) (the order only decides nothing here) */
        for (i = 0; i < ncand; i++) t->vital[rid][i] = cand[i];
        t->nvital[rid] = ncand;
        t->internal[rid] = n_internal;
        t->has_opp[rid] = opp_inside;
        t->nregions++;
    }
    t->region_start[t->nregions] = n;
    for (i = 0; i < t->nchains; i++)
        t->count[i] = t->killed[i] = 0;
    for (i = 0; i < t->nregions; i++) {
        t->bad[i] = 0;
        for (k = 0; k < t->nvital[i]; k++) t->count[t->vital[i][k]]++;
    }
    changed = 1;
    while (changed) {                              /* Benson's iteration */
        int c;
        changed = 0;
        for (c = 0; c < t->nchains; c++) {
            if (t->killed[c] || t->count[c] >= 2)
                continue;
            t->killed[c] = 1;
            changed = 1;
            for (i = t->chain_start[c]; i < t->chain_start[c + 1]; i++) {
                int s = t->chain_stones[i];
                for (k = 0; k < t->nnb[s]; k++) {
                    int rid = t->region_of[t->nb[s][k]], m;
                    if (rid < 0 || t->bad[rid]) continue;
                    t->bad[rid] = 1;
                    for (m = 0; m < t->nvital[rid]; m++) t->count[t->vital[rid][m]]--;
                }
            }
        }
    }
    return 1;
}

static PyObject *
area_map(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long ints[2];
    int size, nn, suicide_legal, pla, p, i, r;
    Py_buffer bv;
    benson_t *t;
    unsigned char *res;
    PyObject *out;
    (void)self;

    if (check_nargs("area_map", nargs, 3) < 0)
        return NULL;
    ints[0] = PyLong_AsLong(args[1]);
    if (ints[0] == -1 && PyErr_Occurred())
        return NULL;
    size = (int)ints[0];
    suicide_legal = PyObject_IsTrue(args[2]);
    if (suicide_legal < 0 || check_size(size) < 0)
        return NULL;
    nn = size * size;
    if (get_byte_buffer(args[0], &bv, nn, 0, "board") < 0)
        return NULL;
    t = (benson_t *)PyMem_Malloc(sizeof(benson_t));
    out = PyBytes_FromStringAndSize(NULL, nn);
    if (t == NULL || out == NULL) {
        PyBuffer_Release(&bv);
        PyMem_Free(t);
        Py_XDECREF(out);
        return PyErr_NoMemory();
    }
    res = (unsigned char *)PyBytes_AS_STRING(out);
    memset(res, 0, (size_t)nn);
    t->nn = nn;
    t->size = size;
    t->b = (const unsigned char *)bv.buf;
    benson_neighbours(t);
    for (pla = 1; pla <= 2; pla++) {
        if (!benson_analyse(t, pla, suicide_legal))
            continue;
        for (i = 0; i < t->nchains; i++)            /* pass-alive stones */
            if (!t->killed[i])
                for (p = t->chain_start[i]; p < t->chain_start[i + 1]; p++)
                    res[t->chain_stones[p]] = (unsigned char)pla;
        for (r = 0; r < t->nregions; r++) {
            int terr = !t->bad[r] && (t->internal[r] <= 1 || !t->has_opp[r]);
            if (!terr && t->has_opp[r])
                continue;
            for (p = t->region_start[r]; p < t->region_start[r + 1]; p++) {
                int q = t->region_pts[p];
                if (terr || res[q] == 0)                /* territory; or an empty-only region */
                    res[q] = (unsigned char)pla;
            }
        }
    }
    for (p = 0; p < nn; p++)                        /* every unmarked stone: its own colour */
        if (res[p] == 0)
            res[p] = t->b[p];
    PyBuffer_Release(&bv);
    PyMem_Free(t);
    return out;
}

/* ------------------------------------------------------------------------------------------ */
/* module                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static PyMethodDef speedups_methods[] = {
    {"legal_mask", (PyCFunction)(void (*)(void))legal_mask, METH_VARARGS | METH_KEYWORDS,
     legal_mask_doc},
    {"chain_liberties", (PyCFunction)(void (*)(void))chain_liberties,
     METH_VARARGS | METH_KEYWORDS, chain_liberties_doc},
    {"area_ownership", (PyCFunction)(void (*)(void))area_ownership,
     METH_VARARGS | METH_KEYWORDS, area_ownership_doc},
    {"basic_planes", (PyCFunction)(void (*)(void))basic_planes, METH_FASTCALL, basic_planes_doc},
    {"masked_softmax", (PyCFunction)(void (*)(void))masked_softmax, METH_FASTCALL,
     masked_softmax_doc},
    {"area_map", (PyCFunction)(void (*)(void))area_map, METH_FASTCALL, area_map_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot speedups_slots[] = {
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "kosumi._speedups",
    "C versions of kosumi's search hot spots; use them through kosumi.accel.",
    0,
    speedups_methods,
    speedups_slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
