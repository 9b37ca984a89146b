/* bench_agg.c - the bench scripts' aggregation: medians, ratios, headline lines. */
/*
 * bench/bench_rt.sh, bench_http.sh and bench_hook.sh keep each round's
 * values and ask this program for everything computed from them, so that
 * every figure they print is computed and formatted one way:
 *
 *   bench_agg median [-f FMT] VALUE...
 *       the median of the numeric VALUEs (words of digits, '.', 'e', 'E',
 *       '+', '-'; n/a and the like are left out), n/a if there is none;
 *       FMT (%.Nf) formats it
 *   bench_agg fmt FMT VALUE
 *       VALUE formatted with FMT, n/a as n/a
 *   bench_agg ratio A B
 *       A/B to 3 decimals, n/a when A or B is n/a or B is 0
 *   bench_agg headline [-f FMT] [-r] NAME KEY1=A KEY2=B [floor=F]
 *       `headline NAME KEY1=A KEY2=B ratio=A/B`: A and B formatted with
 *       FMT, or as given without one, the ratio taken of them as given;
 *       -r: A and B are nanoseconds per operation, the figures printed are
 *       operations per second (1e9/A, 1e9/B) and the ratio theirs (B/A);
 *       floor=F: the least the machine allows for A's figure, measured in
 *       the same rounds, adds ` floor=F vs_floor=A/F` (-r: F in ns as well,
 *       printed per second, vs_floor F/A: how far A is from it, above 1
 *       worse for ns, below 1 for a rate)
 *
 * The numbers come out as the scripts' bash and awk (Debian's mawk) made
 * them before this program, so that figures stay comparable with older
 * runs: an odd count's median is the middle value as it was written, an
 * even count's the mean of the middle two printed as mawk prints a number
 * (an integer up to 2^31-1 as such, else %.6g), as is 1e9/A; FMT formats
 * as bash's printf does, in long double.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NA "n/a"
#define NUMBUF 400  /* "%.3f" of any double, sign and all */

static _Noreturn void usage(void)
{
    fputs("usage: bench_agg median [-f FMT] VALUE...\n"
          "       bench_agg fmt FMT VALUE\n"
          "       bench_agg ratio A B\n"
          "       bench_agg headline [-f FMT] [-r] NAME KEY1=A KEY2=B [floor=F]\n"
          "FMT: %.Nf (N: 0 to 9)\n", stderr);
    exit(2);
}

/* FMT's precision: the scripts only ever print fixed-point figures, and a
 * format of one shape keeps a caller's string out of printf. */
static int precision(const char *fmt)
{
    if (fmt[0] != '%' || fmt[1] != '.' || fmt[2] < '0' || fmt[2] > '9' ||
        fmt[3] != 'f' || fmt[4] != '\0') {
        fprintf(stderr, "bench_agg: format '%s' is not %%.Nf\n", fmt);
        usage();
    }
    return fmt[2] - '0';
}

/* VALUE formatted, onto stdout: long double, as bash's printf reads it. */
static void put_figure(int prec, const char *value)
{
    if (prec < 0 || strcmp(value, NA) == 0)
        fputs(value, stdout);
    else
        printf("%.*Lf", prec, strtold(value, NULL));
}

/* d as mawk's print writes a number, whose output the scripts reformat. */
static const char *awk_number(char *buf, size_t size, double d)
{
    if (d >= -2147483647.0 && d <= 2147483647.0 && (int)d == d)
        snprintf(buf, size, "%d", (int)d);
    else
        snprintf(buf, size, "%.6g", d);
    return buf;
}

static const char *ratio(char *buf, size_t size, const char *a, const char *b)
{
    double den;

    if (strcmp(a, NA) == 0 || strcmp(b, NA) == 0)
        return NA;
    den = strtod(b, NULL);
    if (den == 0)
        return NA;
    snprintf(buf, size, "%.3f", strtod(a, NULL) / den);
    return buf;
}

struct sample {
    const char *text;
    long double value;
    int parsed;     /* strtold read a number at its start */
};

/* A word the median counts: digits, '.', 'e', 'E', '+', '-' only. */
static int numeric_word(const char *s)
{
    return *s != '\0' && s[strspn(s, "0123456789.eE+-")] == '\0';
}

/* sort -g's order: words with no number first, then by value, ties by
 * their text, so that the middle word of an odd count is sort's. */
static int by_value(const void *pa, const void *pb)
{
    const struct sample *a = pa, *b = pb;

    if (a->parsed != b->parsed)
        return a->parsed ? 1 : -1;
    if (a->parsed && a->value != b->value)
        return a->value < b->value ? -1 : 1;
    return strcmp(a->text, b->text);
}

static const char *median(char *buf, size_t size, char **values, int n)
{
    struct sample *s = malloc((n > 0 ? (size_t)n : 1) * sizeof *s);
    int i, m = 0;
    const char *res;

    if (s == NULL) {
        perror("bench_agg");
        exit(1);
    }
    for (i = 0; i < n; i++) {
        char *end;

        if (!numeric_word(values[i]))
            continue;
        s[m].text = values[i];
        s[m].value = strtold(values[i], &end);
        s[m].parsed = end != values[i];
        m++;
    }
    qsort(s, (size_t)m, sizeof *s, by_value);
    if (m == 0)
        res = NA;
    else if (m % 2)
        res = s[m / 2].text;
    else
        res = awk_number(buf, size, (strtod(s[m / 2 - 1].text, NULL) +
                                     strtod(s[m / 2].text, NULL)) / 2);
    free(s);
    return res;
}

/* 1e9/ns: operations per second, n/a unless ns is above 0. */
static const char *per_second(char *buf, size_t size, const char *ns)
{
    double d = strtod(ns, NULL);

    return d > 0 ? awk_number(buf, size, 1e9 / d) : NA;
}

static int headline(int argc, char **argv)
{
    char va[32], vb[32], vf[32], buf[NUMBUF], fbuf[NUMBUF];
    const char *name, *a, *b, *ka, *kb, *r, *f = NULL, *rf = NULL;
    size_t la, lb;
    int prec = -1, rate = 0;

    while (argc > 0 && argv[0][0] == '-') {
        if (strcmp(argv[0], "-f") == 0 && argc > 1) {
            prec = precision(argv[1]);
            argc -= 2, argv += 2;
        } else if (strcmp(argv[0], "-r") == 0) {
            rate = 1;
            argc--, argv++;
        } else {
            usage();
        }
    }
    if (argc == 4 && strncmp(argv[3], "floor=", 6) == 0)
        f = argv[3] + 6;
    else if (argc != 3)
        usage();
    if ((a = strchr(argv[1], '=')) == NULL || (b = strchr(argv[2], '=')) == NULL)
        usage();
    name = argv[0];
    ka = argv[1], la = (size_t)(a - ka), a++;
    kb = argv[2], lb = (size_t)(b - kb), b++;
    if (rate) {
        /* ours/peer of operations per second is peer/ours of ns each */
        r = ratio(buf, sizeof buf, b, a);
        if (f != NULL) {
            rf = ratio(fbuf, sizeof fbuf, f, a);
            f = per_second(vf, sizeof vf, f);
        }
        a = per_second(va, sizeof va, a);
        b = per_second(vb, sizeof vb, b);
    } else {
        r = ratio(buf, sizeof buf, a, b);
        if (f != NULL)
            rf = ratio(fbuf, sizeof fbuf, a, f);
    }
    printf("headline %s %.*s=", name, (int)la, ka);
    put_figure(prec, a);
    printf(" %.*s=", (int)lb, kb);
    put_figure(prec, b);
    printf(" ratio=%s", r);
    if (f != NULL) {
        printf(" floor=");
        put_figure(prec, f);
        printf(" vs_floor=%s", rf);
    }
    putchar('\n');
    return 0;
}

int main(int argc, char **argv)
{
    char buf[NUMBUF];
    const char *cmd;
    int prec = -1;

    if (argc < 2)
        usage();
    cmd = argv[1];
    argc -= 2, argv += 2;
    if (strcmp(cmd, "median") == 0) {
        if (argc > 1 && strcmp(argv[0], "-f") == 0) {
            prec = precision(argv[1]);
            argc -= 2, argv += 2;
        }
        put_figure(prec, median(buf, sizeof buf, argv, argc));
        putchar('\n');
    } else if (strcmp(cmd, "fmt") == 0 && argc == 2) {
        put_figure(precision(argv[0]), argv[1]);
        putchar('\n');
    } else if (strcmp(cmd, "ratio") == 0 && argc == 2) {
        puts(ratio(buf, sizeof buf, argv[0], argv[1]));
    } else if (strcmp(cmd, "headline") == 0) {
        return headline(argc, argv);
    } else {
        usage();
    }
    return 0;
}
