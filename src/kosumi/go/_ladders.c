/* Ladder reading in C: the search of kosumi.go.ladders, move for move, for the whole-board
 * readings of kosumi.go.ladder_planes (the ladder feature planes and the search's dead-ladder
 * escapes), which the engine makes at every node it encodes.
 *
 * The rules, the move order, the 25,000-move budget and the depth limit are those of
 * kosumi/go/ladders.py (its docstrings are the specification; this file follows its functions
 * one by one, under the same names). Only the bookkeeping differs: sets are arrays stamped
 * with a generation number, lists live in caller-given buffers or on one growing stack (the
 * defender's candidate moves and the stones each move captured), and running out of budget
 * unwinds the reading move by move instead of raising.
 *
 * Boards: N*N one-byte values, row-major from the top-left, 0 empty, 1 black, 2 white; inside,
 * a padded (N+2)^2 layout with a ring of WALL, so neighbours need no bounds checks. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

enum { EMPTY = 0, BLACK = 1, WHITE = 2, WALL = 3 };
#define MAXN 19
#define MAXW (MAXN + 2)
#define MAXLOC (MAXW * MAXW)
#define NODE_BUDGET 25000
#define OUT_OF_BUDGET (-1)
#define OUT_OF_MEMORY (-2)

typedef struct {
    unsigned char c[MAXLOC];
    int w, size, ko, nodes, depth_limit;
    unsigned int gen, own_gen;
    unsigned int flood[MAXLOC];  /* stones seen by the current flood fill */
    unsigned int flib[MAXLOC];   /* liberties seen by the current flood fill */
    unsigned int own[MAXLOC];    /* the stones of the chain a frame reads (before it recurses) */
    unsigned int lap[MAXLOC];    /* libs_after_play: its liberties */
    unsigned int cap[MAXLOC];    /* libs_after_play: the stones its move would capture */
    unsigned int fr[MAXLOC];     /* libs_after_play: friendly stones counted */
    unsigned int chk[MAXLOC];    /* capture_moves / has_capture: opponent stones checked */
    int stack[MAXLOC];
    int hstones[MAXLOC], hlibs[MAXLOC]; /* chains read by the helpers */
    int fstones[MAXLOC], flibs[MAXLOC]; /* a frame's chain, used before it recurses */
    int *arena;                         /* candidate moves and captured stones, LIFO */
    int top, arena_cap;
} LB;

typedef struct {
    int ko, start, n, ok;
} Rec;

/* Room for n more items on the arena; 0 when memory runs out. */
static int
reserve(LB *b, int n)
{
    if (b->top + n > b->arena_cap) {
        int ncap = b->arena_cap ? 2 * b->arena_cap : 1024;
        while (ncap < b->top + n)
            ncap *= 2;
        int *na = (int *)realloc(b->arena, (size_t)ncap * sizeof(int));
        if (na == NULL)
            return 0;
        b->arena = na;
        b->arena_cap = ncap;
    }
    return 1;
}

static int
push(LB *b, int v)
{
    if (!reserve(b, 1))
        return 0;
    b->arena[b->top++] = v;
    return 1;
}

#define NBS(s, w) { (s) - (w), (s) - 1, (s) + 1, (s) + (w) }

/* ------------------------------------------------------------------------------ chains */
static void
chain(LB *b, int loc, int *st, int *ns, int *libs, int *nl)
{
    unsigned int g = ++b->gen;
    int col = b->c[loc], w = b->w, n = 0, k = 0;
    st[n++] = loc;
    b->flood[loc] = g;
    for (int i = 0; i < n; i++) {
        int s = st[i];
        int nb[4] = NBS(s, w);
        for (int j = 0; j < 4; j++) {
            int q = nb[j], v = b->c[q];
            if (v == EMPTY) {
                if (b->flib[q] != g) {
                    b->flib[q] = g;
                    libs[k++] = q;
                }
            }
            else if (v == col && b->flood[q] != g) {
                b->flood[q] = g;
                st[n++] = q;
            }
        }
    }
    *ns = n;
    *nl = k;
}

static int
libs_upto(LB *b, int loc, int cap)
{
    unsigned int g = ++b->gen;
    int col = b->c[loc], w = b->w, sp = 0, n = 0;
    b->stack[sp++] = loc;
    b->flood[loc] = g;
    while (sp && n < cap) {
        int s = b->stack[--sp];
        int nb[4] = NBS(s, w);
        for (int j = 0; j < 4; j++) {
            int q = nb[j], v = b->c[q];
            if (v == EMPTY) {
                if (b->flib[q] != g) {
                    b->flib[q] = g;
                    if (++n >= cap)
                        break;
                }
            }
            else if (v == col && b->flood[q] != g) {
                b->flood[q] = g;
                b->stack[sp++] = q;
            }
        }
    }
    return n;
}

static int
has_liberty(LB *b, int loc)
{
    unsigned int g = ++b->gen;
    int col = b->c[loc], w = b->w, sp = 0;
    b->stack[sp++] = loc;
    b->flood[loc] = g;
    while (sp) {
        int s = b->stack[--sp];
        int nb[4] = NBS(s, w);
        for (int j = 0; j < 4; j++) {
            int q = nb[j], v = b->c[q];
            if (v == EMPTY)
                return 1;
            if (v == col && b->flood[q] != g) {
                b->flood[q] = g;
                b->stack[sp++] = q;
            }
        }
    }
    return 0;
}

/* The lone liberty of the chain at loc, or -1 (none or several); the stones visited are
 * stamped with mark_gen in mark when mark is given. */
static int
atari_liberty(LB *b, int loc, unsigned int *mark, unsigned int mark_gen)
{
    unsigned int g = ++b->gen;
    int col = b->c[loc], w = b->w, sp = 0, lib = -1, many = 0;
    b->stack[sp++] = loc;
    b->flood[loc] = g;
    if (mark)
        mark[loc] = mark_gen;
    while (sp && !many) {
        int s = b->stack[--sp];
        int nb[4] = NBS(s, w);
        for (int j = 0; j < 4; j++) {
            int q = nb[j], v = b->c[q];
            if (v == EMPTY) {
                if (lib < 0)
                    lib = q;
                else if (q != lib) {
                    many = 1;
                    break;
                }
            }
            else if (v == col && b->flood[q] != g) {
                b->flood[q] = g;
                if (mark)
                    mark[q] = mark_gen;
                b->stack[sp++] = q;
            }
        }
    }
    return many ? -1 : lib;
}

static int
is_legal(LB *b, int loc, int col)
{
    if (b->c[loc] != EMPTY || loc == b->ko)
        return 0;
    int opp = 3 - col, w = b->w;
    int nb[4] = NBS(loc, w);
    for (int j = 0; j < 4; j++)
        if (b->c[nb[j]] == EMPTY)
            return 1;
    for (int j = 0; j < 4; j++) {
        int q = nb[j], v = b->c[q];
        if ((v == col && libs_upto(b, q, 2) >= 2) || (v == opp && atari_liberty(b, q, NULL, 0) >= 0))
            return 1;
    }
    return 0;
}

static Rec
play(LB *b, int loc, int col)
{
    Rec r = {b->ko, b->top, 0, 1};
    int opp = 3 - col, w = b->w;
    int nb[4] = NBS(loc, w);
    b->c[loc] = (unsigned char)col;
    for (int j = 0; j < 4; j++) {
        int q = nb[j];
        if (b->c[q] == opp && !has_liberty(b, q)) {
            int ns, nl;
            chain(b, q, b->hstones, &ns, b->hlibs, &nl);
            if (!reserve(b, ns)) { /* out of memory: the stones stay, the reading stops */
                r.ok = 0;
                continue;
            }
            for (int i = 0; i < ns; i++) {
                b->c[b->hstones[i]] = EMPTY;
                b->arena[b->top++] = b->hstones[i];
            }
            r.n += ns;
        }
    }
    b->ko = 0;
    if (r.n == 1) {
        int lone = 0, libs_n = 0;
        for (int j = 0; j < 4; j++) {
            int v = b->c[nb[j]];
            if (v == col) {
                lone = 1;
                break;
            }
            if (v == EMPTY)
                libs_n++;
        }
        if (!lone && libs_n == 1)
            b->ko = b->arena[r.start];
    }
    b->nodes++;
    return r;
}

static void
undo(LB *b, int loc, int col, Rec r)
{
    int opp = 3 - col;
    b->c[loc] = EMPTY;
    for (int i = r.start; i < r.start + r.n; i++)
        b->c[b->arena[i]] = (unsigned char)opp;
    b->top = r.start;
    b->ko = r.ko;
}

/* ------------------------------------------------------------------- helpers of the search */
static int
immediate_libs(LB *b, int loc)
{
    int w = b->w;
    return (b->c[loc - w] == EMPTY) + (b->c[loc - 1] == EMPTY) + (b->c[loc + 1] == EMPTY)
        + (b->c[loc + w] == EMPTY);
}

static int
would_be_ko_capture(LB *b, int loc, int col)
{
    int opp = 3 - col, w = b->w, capturable = 0;
    int nb[4] = NBS(loc, w);
    for (int j = 0; j < 4; j++) {
        int q = nb[j], v = b->c[q];
        if (v == WALL)
            continue;
        if (v != opp)
            return 0;
        if (atari_liberty(b, q, NULL, 0) >= 0) {
            if (capturable)
                return 0;
            capturable = q;
        }
    }
    if (!capturable)
        return 0;
    int cc = b->c[capturable];
    int cb[4] = NBS(capturable, w);
    for (int j = 0; j < 4; j++)
        if (b->c[cb[j]] == cc)
            return 0;
    return 1;
}

static int
libs_after_play(LB *b, int loc, int col, int cap)
{
    unsigned int gl = ++b->gen, gc = ++b->gen;
    int opp = 3 - col, w = b->w, nlibs = 0, friends[4], nf = 0, ns, nl;
    int nb[4] = NBS(loc, w);
    for (int j = 0; j < 4; j++) {
        int q = nb[j], v = b->c[q];
        if (v == EMPTY) {
            if (b->lap[q] != gl) {
                b->lap[q] = gl;
                nlibs++;
            }
        }
        else if (v == opp) {
            if (b->cap[q] != gc) {
                chain(b, q, b->hstones, &ns, b->hlibs, &nl);
                if (nl == 1)
                    for (int i = 0; i < ns; i++)
                        b->cap[b->hstones[i]] = gc;
            }
            if (b->cap[q] == gc && b->lap[q] != gl) {
                b->lap[q] = gl;
                nlibs++;
            }
        }
        else if (v == col)
            friends[nf++] = q;
    }
    unsigned int gf = ++b->gen;
    for (int f = 0; f < nf; f++) {
        if (b->fr[friends[f]] == gf)
            continue;
        chain(b, friends[f], b->hstones, &ns, b->hlibs, &nl);
        for (int i = 0; i < ns; i++)
            b->fr[b->hstones[i]] = gf;
        for (int i = 0; i < ns; i++) {
            int s = b->hstones[i];
            int sb[4] = NBS(s, w);
            for (int j = 0; j < 4; j++) {
                int q = sb[j];
                if (q != loc && (b->c[q] == EMPTY || b->cap[q] == gc) && b->lap[q] != gl) {
                    b->lap[q] = gl;
                    nlibs++;
                }
            }
        }
    }
    return nlibs < cap ? nlibs : cap;
}

static int
in_own(LB *b, int q)
{
    return b->own[q] == b->own_gen;
}

static void
mark_own(LB *b, const int *stones, int ns)
{
    unsigned int g = ++b->gen;
    for (int i = 0; i < ns; i++)
        b->own[stones[i]] = g;
    b->own_gen = g;
}

static int
extension_escapes(LB *b, int loc, int col)
{
    int w = b->w;
    int nb[4] = NBS(loc, w);
    if ((b->c[nb[0]] == EMPTY) + (b->c[nb[1]] == EMPTY) + (b->c[nb[2]] == EMPTY)
        + (b->c[nb[3]] == EMPTY) >= 3)
        return 1;
    for (int j = 0; j < 4; j++) {
        int q = nb[j];
        if (b->c[q] == col && !in_own(b, q) && libs_upto(b, q, 4) >= 4)
            return 1;
    }
    return 0;
}

static void
libs_bounds(LB *b, int loc, int col, int chain_libs, int *lower, int *upper)
{
    int w = b->w, opp = 3 - col, empty = 0, caps = 0, cap_stones = 0, conn = 0, conn_max = 0;
    int nb[4] = NBS(loc, w);
    for (int j = 0; j < 4; j++) {
        int q = nb[j], v = b->c[q];
        if (v == EMPTY)
            empty++;
        else if (v == opp) {
            int ns, nl;
            chain(b, q, b->hstones, &ns, b->hlibs, &nl);
            if (nl == 1) {
                caps++;
                cap_stones += ns;
            }
        }
        else if (v == col) {
            int n = (in_own(b, q) ? chain_libs : libs_upto(b, q, 1000)) - 1;
            conn += n;
            if (n > conn_max)
                conn_max = n;
        }
    }
    *lower = caps + (conn_max > empty ? conn_max : empty);
    *upper = empty + cap_stones + conn;
}

/* Pushes the liberties of the opponent chains in atari next to stones; returns how many. */
static int
capture_moves(LB *b, const int *stones, int ns, int col, int m0, int *ok)
{
    unsigned int g = ++b->gen;
    int opp = 3 - col, w = b->w, k = 0;
    for (int i = 0; i < ns; i++) {
        int s = stones[i];
        int nb[4] = NBS(s, w);
        for (int j = 0; j < 4; j++) {
            int q = nb[j];
            if (b->c[q] == opp && b->chk[q] != g) {
                int lib = atari_liberty(b, q, b->chk, g);
                if (lib < 0)
                    continue;
                int seen = 0;
                for (int t = 0; t < k; t++)
                    if (b->arena[m0 + t] == lib)
                        seen = 1;
                if (!seen) {
                    if (!push(b, lib))
                        *ok = 0;
                    else
                        k++;
                }
            }
        }
    }
    return k;
}

static int
has_capture(LB *b, const int *stones, int ns, int col)
{
    unsigned int g = ++b->gen;
    int opp = 3 - col, w = b->w;
    for (int i = 0; i < ns; i++) {
        int s = stones[i];
        int nb[4] = NBS(s, w);
        for (int j = 0; j < 4; j++) {
            int q = nb[j];
            if (b->c[q] == opp && b->chk[q] != g && atari_liberty(b, q, b->chk, g) >= 0)
                return 1;
        }
    }
    return 0;
}

static int
connection_score_x2(LB *b, int loc, int col, int chain_libs)
{
    int w = b->w, total = 0;
    int nb[4] = NBS(loc, w);
    for (int j = 0; j < 4; j++) {
        int q = nb[j];
        if (b->c[q] == col) {
            int n = in_own(b, q) ? chain_libs : libs_upto(b, q, 1000);
            if (n > 1)
                total += 2 * n - 3;
        }
    }
    return total;
}

/* ------------------------------------------------------------------------------ the search */
static int search(LB *b, int loc, int defender_turn, int depth);

/* The liberties worth filling, the more promising first (0, 1 or 2 of them, into out). */
static int
fills(LB *b, int a, int bb, int la, int lb, int pla, int *out)
{
    int w = b->w, d = a - bb;
    int adjacent = (d == 1 || d == -1 || d == w || d == -w);
    int a_escape = la - adjacent >= 3, b_escape = lb - adjacent >= 3;
    if (a_escape && b_escape)
        return 0;
    if (a_escape) {
        out[0] = a;
        return 1;
    }
    if (b_escape) {
        out[0] = bb;
        return 1;
    }
    int sa = 2 * la + connection_score_x2(b, a, pla, 2);
    int sb = 2 * lb + connection_score_x2(b, bb, pla, 2);
    if (sb > sa) {
        out[0] = bb;
        out[1] = a;
    }
    else {
        out[0] = a;
        out[1] = bb;
    }
    return 2;
}

static int
attack(LB *b, int loc, int depth)
{
    int pla = b->c[loc], opp = 3 - pla, ns, nl;
    chain(b, loc, b->fstones, &ns, b->flibs, &nl);
    if (nl <= 1)
        return 1;
    if (nl >= 3)
        return 0;
    int a = b->flibs[0], bb = b->flibs[1];
    int la = immediate_libs(b, a), lb = immediate_libs(b, bb);
    if (la == 0 && lb == 0 && would_be_ko_capture(b, a, opp) && would_be_ko_capture(b, bb, opp)
        && libs_after_play(b, a, pla, 3) <= 2 && libs_after_play(b, bb, pla, 3) <= 2
        && !has_capture(b, b->fstones, ns, pla))
        return 1;
    mark_own(b, b->fstones, ns);
    int moves[2];
    int k = fills(b, a, bb, la, lb, pla, moves);
    for (int i = 0; i < k; i++) {
        int m = moves[i];
        if (!is_legal(b, m, opp))
            continue;
        Rec r = play(b, m, opp);
        if (!r.ok) {
            undo(b, m, opp, r);
            return OUT_OF_MEMORY;
        }
        if (b->nodes >= NODE_BUDGET) {
            undo(b, m, opp, r);
            return OUT_OF_BUDGET;
        }
        int captured = search(b, loc, 1, depth + 1);
        undo(b, m, opp, r);
        if (captured)
            return captured; /* 1, or an error */
    }
    return 0;
}

static int
defend(LB *b, int loc, int depth)
{
    int pla = b->c[loc], ns, nl, ok = 1;
    if (b->ko) /* the attacker's last move was a ko capture: the defender wins the ko */
        return 0;
    chain(b, loc, b->fstones, &ns, b->flibs, &nl);
    if (nl >= 2)
        return 0;
    if (nl == 0) /* not reached: the attacker never fills a chain's last liberty */
        return 1;
    mark_own(b, b->fstones, ns);
    int lib = b->flibs[0];
    if (extension_escapes(b, lib, pla))
        return 0;
    int m0 = b->top;
    int k = capture_moves(b, b->fstones, ns, pla, m0, &ok);
    int seen = 0;
    for (int t = 0; t < k; t++)
        if (b->arena[m0 + t] == lib)
            seen = 1;
    if (!seen) {
        if (!push(b, lib))
            ok = 0;
        else
            k++;
    }
    if (!ok) {
        b->top = m0;
        return OUT_OF_MEMORY;
    }
    int lower, upper;
    libs_bounds(b, b->arena[m0 + k - 1], pla, 1, &lower, &upper);
    int result = 1;
    if (lower >= 3)
        result = 0;
    else if (!(k == 1 && upper <= 1)) {
        for (int i = 0; i < k; i++) {
            int m = b->arena[m0 + i];
            if (!is_legal(b, m, pla))
                continue;
            Rec r = play(b, m, pla);
            if (!r.ok) {
                undo(b, m, pla, r);
                result = OUT_OF_MEMORY;
                break;
            }
            if (b->nodes >= NODE_BUDGET) {
                undo(b, m, pla, r);
                result = OUT_OF_BUDGET;
                break;
            }
            int captured = search(b, loc, 0, depth + 1);
            undo(b, m, pla, r);
            if (captured != 1) {
                result = captured; /* escaped (0), or an error */
                break;
            }
        }
    }
    b->top = m0;
    return result;
}

static int
search(LB *b, int loc, int defender_turn, int depth)
{
    if (depth >= b->depth_limit - 1)
        return 1;
    return defender_turn ? defend(b, loc, depth) : attack(b, loc, depth);
}

/* Captured (1) or not (0), the defender to move, the root ko ban lifted; out of budget: 0;
 * OUT_OF_MEMORY. */
static int
captured_defender_first(LB *b, int loc)
{
    int saved_ko = b->ko;
    b->ko = 0;
    b->nodes = 0;
    int r = search(b, loc, 1, 0);
    b->ko = saved_ko;
    return r == OUT_OF_MEMORY ? r : r == 1;
}

/* The attacker's first moves that capture the 2-liberty chain at loc (into out; how many). */
static int
working_moves(LB *b, int loc, int *out)
{
    int pla = b->c[loc], opp = 3 - pla, ns, nl, n = 0;
    chain(b, loc, b->fstones, &ns, b->flibs, &nl);
    int a = b->flibs[0], bb = b->flibs[1], w = b->w, d = a - bb;
    int adjacent = (d == 1 || d == -1 || d == w || d == -w);
    int pairs[2][2] = {{a, bb}, {bb, a}};
    for (int i = 0; i < 2; i++) {
        int m = pairs[i][0], other = pairs[i][1];
        if (immediate_libs(b, other) - adjacent >= 3)
            continue;
        if (is_legal(b, m, opp)) {
            Rec r = play(b, m, opp);
            int c = r.ok ? captured_defender_first(b, loc) : OUT_OF_MEMORY;
            undo(b, m, opp, r);
            if (c < 0)
                return c;
            if (c == 1)
                out[n++] = m;
        }
    }
    return n;
}

/* ------------------------------------------------------------------------------ the board */
static int
to_loc(const LB *b, int p)
{
    return (p / b->size + 1) * b->w + (p % b->size + 1);
}

static int
to_pt(const LB *b, int loc)
{
    return (loc / b->w - 1) * b->size + (loc % b->w - 1);
}

static LB *
lb_new(const unsigned char *board, int size, int ko)
{
    LB *b = (LB *)calloc(1, sizeof(LB));
    if (b == NULL)
        return NULL;
    b->size = size;
    b->w = size + 2;
    memset(b->c, WALL, sizeof(b->c));
    for (int p = 0; p < size * size; p++)
        b->c[to_loc(b, p)] = board[p];
    b->ko = ko >= 0 ? to_loc(b, ko) : 0;
    b->depth_limit = size * size * 3 / 2 + 1;
    return b;
}

static void
lb_free(LB *b)
{
    free(b->arena);
    free(b);
}

static int
read_planes(LB *b, unsigned char *captured, unsigned char *working)
{
    int nn = b->size * b->size, ns, nl, root[MAXLOC], moves[2];
    unsigned char done[MAXN * MAXN];
    memset(done, 0, sizeof(done));
    for (int p = 0; p < nn; p++) {
        int loc = to_loc(b, p), col = b->c[loc];
        if (col == EMPTY || done[p])
            continue;
        chain(b, loc, b->fstones, &ns, b->flibs, &nl);
        memcpy(root, b->fstones, (size_t)ns * sizeof(int));
        for (int i = 0; i < ns; i++)
            done[to_pt(b, root[i])] = 1;
        int taken, k = 0;
        if (nl == 1)
            taken = captured_defender_first(b, loc);
        else if (nl == 2) {
            k = working_moves(b, loc, moves);
            if (k < 0)
                return k;
            taken = k > 0;
        }
        else
            continue;
        if (taken < 0)
            return taken;
        if (taken) {
            for (int i = 0; i < ns; i++)
                captured[to_pt(b, root[i])] = 1;
            for (int i = 0; i < k; i++)
                working[col * nn + to_pt(b, moves[i])] = 1;
        }
    }
    return 0;
}

static int
read_escapes(LB *b, int color, unsigned char *out)
{
    int nn = b->size * b->size, ns, nl;
    unsigned char done[MAXN * MAXN];
    memset(done, 0, sizeof(done));
    for (int p = 0; p < nn; p++) {
        int loc = to_loc(b, p);
        if (b->c[loc] != color || done[p])
            continue;
        chain(b, loc, b->fstones, &ns, b->flibs, &nl);
        for (int i = 0; i < ns; i++)
            done[to_pt(b, b->fstones[i])] = 1;
        if (nl != 1)
            continue;
        int lib = b->flibs[0];
        if (!is_legal(b, lib, color))
            continue;
        Rec r = play(b, lib, color);
        int runs = r.ok && libs_upto(b, lib, 3) == 2;
        undo(b, lib, color, r);
        if (!r.ok)
            return OUT_OF_MEMORY;
        if (!runs)
            continue;
        int c = captured_defender_first(b, loc);
        if (c < 0)
            return c;
        if (c == 1)
            out[to_pt(b, lib)] = 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------ Python */
static int
parse_board(PyObject *obj, Py_buffer *view, long size)
{
    if (size < 2 || size > MAXN) {
        PyErr_Format(PyExc_ValueError, "board size %ld is not supported (use 2..%d)", size, MAXN);
        return 0;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0)
        return 0;
    if (view->itemsize != 1 || view->len != size * size) {
        PyErr_Format(PyExc_ValueError, "board must hold %ld one-byte items (got %zd bytes)",
                     size * size, view->len);
        PyBuffer_Release(view);
        return 0;
    }
    const unsigned char *v = (const unsigned char *)view->buf;
    for (Py_ssize_t p = 0; p < view->len; p++)
        if (v[p] > 2) {
            PyErr_Format(PyExc_ValueError,
                         "board values must be 0 (empty), 1 (black) or 2 (white); got %d at point %zd",
                         v[p], p);
            PyBuffer_Release(view);
            return 0;
        }
    return 1;
}

static LB *
start(PyObject *const *args, long *size, long *ko, int ko_arg)
{
    Py_buffer view;
    *size = PyLong_AsLong(args[1]);
    *ko = PyLong_AsLong(args[ko_arg]);
    if (PyErr_Occurred())
        return NULL;
    if (*size < 2 || *size > MAXN) {
        PyErr_Format(PyExc_ValueError, "board size %ld is not supported (use 2..%d)", *size, MAXN);
        return NULL;
    }
    if (*ko < -1 || *ko >= *size * *size) {
        PyErr_Format(PyExc_ValueError, "ko point %ld is off the board (use -1 for none)", *ko);
        return NULL;
    }
    if (!parse_board(args[0], &view, *size))
        return NULL;
    LB *b = lb_new((const unsigned char *)view.buf, (int)*size, (int)*ko);
    PyBuffer_Release(&view);
    if (b == NULL)
        PyErr_NoMemory();
    return b;
}

PyDoc_STRVAR(ladder_planes_doc,
"ladder_planes(board, size, ko, /) -> (captured, working)\n\n"
"The whole-board ladder reading of kosumi.go.ladder_planes.ladder_features: captured, N*N\n"
"bytes (1: a stone of a 1- or 2-liberty chain that a ladder captures); working, 3*N*N bytes\n"
"(working[c*N*N + p] = 1: the attacker's move p ladder-captures a 2-liberty chain of colour c).");

static PyObject *
ladder_planes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long size, ko;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "ladder_planes(board, size, ko) takes 3 arguments");
        return NULL;
    }
    LB *b = start(args, &size, &ko, 2);
    if (b == NULL)
        return NULL;
    int nn = (int)(size * size), rc;
    unsigned char captured[MAXN * MAXN], working[3 * MAXN * MAXN];
    memset(captured, 0, sizeof(captured));
    memset(working, 0, sizeof(working));
    Py_BEGIN_ALLOW_THREADS
    rc = read_planes(b, captured, working);
    Py_END_ALLOW_THREADS
    lb_free(b);
    if (rc < 0)
        return PyErr_NoMemory();
    return Py_BuildValue("(y#y#)", (const char *)captured, (Py_ssize_t)nn,
                         (const char *)working, (Py_ssize_t)(3 * nn));
}

PyDoc_STRVAR(dead_ladder_escapes_doc,
"dead_ladder_escapes(board, size, color, ko, /) -> bytes\n\n"
"N*N bytes, 1 at the liberties of color's one-liberty chains whose extension only runs a\n"
"ladder that captures them (kosumi.go.ladder_planes.dead_ladder_escapes).");

static PyObject *
dead_ladder_escapes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long size, ko, color;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "dead_ladder_escapes(board, size, color, ko) takes 4 arguments");
        return NULL;
    }
    color = PyLong_AsLong(args[2]);
    if (color == -1 && PyErr_Occurred())
        return NULL;
    if (color != BLACK && color != WHITE) {
        PyErr_Format(PyExc_ValueError, "color must be 1 (black) or 2 (white), got %ld", color);
        return NULL;
    }
    LB *b = start(args, &size, &ko, 3);
    if (b == NULL)
        return NULL;
    int rc;
    unsigned char out[MAXN * MAXN];
    memset(out, 0, sizeof(out));
    Py_BEGIN_ALLOW_THREADS
    rc = read_escapes(b, (int)color, out);
    Py_END_ALLOW_THREADS
    lb_free(b);
    if (rc < 0)
        return PyErr_NoMemory();
    return PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)(size * size));
}

static PyMethodDef ladders_methods[] = {
    {"ladder_planes", (PyCFunction)(void (*)(void))ladder_planes, METH_FASTCALL,
     ladder_planes_doc},
    {"dead_ladder_escapes", (PyCFunction)(void (*)(void))dead_ladder_escapes, METH_FASTCALL,
     dead_ladder_escapes_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot ladders_slots[] = {
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef ladders_module = {
    PyModuleDef_HEAD_INIT, "kosumi.go._ladders",
    "C versions of the whole-board ladder readings (see kosumi.go.ladder_planes).", 0,
    ladders_methods, ladders_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__ladders(void)
{
    return PyModuleDef_Init(&ladders_module);
}
