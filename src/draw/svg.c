/* The SVG writer: a document grown in memory, labels escaped for XML. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draw/svg.h"

static int grow(svg_t *s, size_t more)
{
    if (s->failed)
        return 0;
    if (s->len + more + 1 <= s->cap)
        return 1;
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->len + more + 1)
        cap *= 2;
    char *t = realloc(s->text, cap);
    if (!t) {
        s->failed = 1;
        return 0;
    }
    s->text = t;
    s->cap = cap;
    return 1;
}

static void append(svg_t *s, const char *p, size_t n)
{
    if (!grow(s, n))
        return;
    memcpy(s->text + s->len, p, n);
    s->len += n;
    s->text[s->len] = '\0';
}

void svg_printf(svg_t *s, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        s->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        append(s, small, (size_t)n);
        return;
    }
    if (!grow(s, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(s->text + s->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    s->len += (size_t)n;
}

void svg_begin(svg_t *s, double width, double height)
{
    memset(s, 0, sizeof *s);
    s->c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (s->c_locale)
        s->host_locale = uselocale(s->c_locale);
    svg_printf(s, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"%s\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
               width, height, width, height, SVG_FONT);
}

/* Length of the valid UTF-8 sequence at p (XML characters only), or 0. */
static int utf8_char(const unsigned char *p, unsigned *cp)
{
    unsigned c = p[0];
    int n;
    if (c < 0x80)
        n = 1;
    else if (c >= 0xC2 && c <= 0xDF)
        n = 2, c &= 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, c &= 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, c &= 0x07;
    else
        return 0;
    for (int k = 1; k < n; k++) {
        if ((p[k] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (p[k] & 0x3F);
    }
    static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < least[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) || c == 0xFFFE ||
        c == 0xFFFF)
        return 0;
    *cp = c;
    return n;
}

void svg_escaped(svg_t *s, const char *text)
{
    const unsigned char *p = (const unsigned char *)(text ? text : "");
    while (*p) {
        unsigned cp;
        int n = utf8_char(p, &cp);
        if (!n) {
            append(s, "\xEF\xBF\xBD", 3);   /* U+FFFD for a byte that starts nothing valid */
            p++;
            continue;
        }
        switch (cp) {
        case '&': append(s, "&amp;", 5); break;
        case '<': append(s, "&lt;", 4); break;
        case '>': append(s, "&gt;", 4); break;
        case '"': append(s, "&quot;", 6); break;
        case '\'': append(s, "&apos;", 6); break;
        default:
            if (cp >= 0x20 || cp == '\t')   /* XML forbids the other controls */
                append(s, (const char *)p, (size_t)n);
        }
        p += n;
    }
}

void svg_text(svg_t *s, double x, double y, double size, const char *anchor,
              const char *extra, const char *text)
{
    svg_printf(s, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.1f\"", x, y, size);
    if (anchor)
        svg_printf(s, " text-anchor=\"%s\"", anchor);
    if (extra)
        svg_printf(s, " %s", extra);
    append(s, ">", 1);
    svg_escaped(s, text);
    append(s, "</text>\n", 8);
}

/* Back to the host's locale. */
static void restore_locale(svg_t *s)
{
    if (s->c_locale) {
        uselocale(s->host_locale);
        freelocale(s->c_locale);
    }
    s->c_locale = (locale_t)0;
}

int svg_finish(svg_t *s, char **out, ag_error_t *err)
{
    append(s, "</svg>\n", 7);
    restore_locale(s);
    *out = NULL;
    if (s->failed) {
        svg_discard(s);
        return ag_fail(err, AG_ENOMEM, "picture: out of memory");
    }
    *out = s->text;
    memset(s, 0, sizeof *s);
    return AG_OK;
}

void svg_discard(svg_t *s)
{
    restore_locale(s);
    free(s->text);
    memset(s, 0, sizeof *s);
}

void ag_svg_free(char *svg)
{
    free(svg);
}

double svg_text_width(const char *text, double size)
{
    double w = 0;
    const unsigned char *p = (const unsigned char *)(text ? text : "");
    while (*p) {
        unsigned cp = 0xFFFD;
        int n = utf8_char(p, &cp);
        p += n ? n : 1;
        /* East Asian wide characters take about a full em */
        w += cp >= 0x1100 && (cp <= 0x115F || (cp >= 0x2E80 && cp <= 0xA4CF) ||
                              (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFAFF) ||
                              (cp >= 0xFF00 && cp <= 0xFF60) || cp >= 0x20000)
                 ? 1.0 : 0.62;
    }
    return w * size;
}

const char *svg_hex(ag_rgb_t c, char buf[8])
{
    snprintf(buf, 8, "#%02x%02x%02x", c.r, c.g, c.b);
    return buf;
}

const char *svg_category(int64_t k)
{
    static const char *const tableau[10] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                            "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                            "#bcbd22", "#17becf"};
    return tableau[k % 10];
}

const char *svg_num(double x, char buf[32])
{
    if (x == 0)
        x = 0;   /* no "-0" */
    snprintf(buf, 32, "%.4g", x);
    return buf;
}

int svg_ticks(double lo, double hi, int want, double *ticks, int cap)
{
    if (!(hi > lo) || want < 1)
        return 0;
    const double raw = (hi - lo) / want, mag = pow(10, floor(log10(raw)));
    const double r = raw / mag;
    const double step = (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
    int n = 0;
    for (double t = ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9 && n < cap; t += step)
        ticks[n++] = fabs(t) < step * 1e-9 ? 0 : t;
    return n;
}

const char *svg_clip(const char *text, int max_chars, char *buf, size_t size)
{
    const unsigned char *p = (const unsigned char *)(text ? text : "");
    size_t used = 0;
    int chars = 0;
    while (*p && chars < max_chars) {
        unsigned cp;
        int n = utf8_char(p, &cp);
        if (!n)
            n = 1;   /* svg_escaped replaces it */
        if (used + (size_t)n + 4 > size)
            break;
        memcpy(buf + used, p, (size_t)n);
        used += (size_t)n, p += n, chars++;
    }
    if (*p && used + 4 <= size) {
        memcpy(buf + used, "\xE2\x80\xA6", 3);   /* … */
        used += 3;
    }
    buf[used] = '\0';
    return buf;
}
