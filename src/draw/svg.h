/* The SVG writer the pictures share: text grown in memory, escaped labels. */
#ifndef AG_DRAW_SVG_H
#define AG_DRAW_SVG_H

#include <locale.h>
#include <stddef.h>

#include "base/base.h"
#include "attngraph/draw.h"

/* An SVG document being written. A failed append (memory) sets failed; the
   document is then dropped by svg_finish. */
typedef struct {
    char *text;
    size_t len, cap;
    int failed;
    /* numbers are written in the C locale whatever the host set (a decimal
       comma would break the XML's numbers); the host's is restored at the end */
    locale_t c_locale, host_locale;
} svg_t;

#define SVG_FONT "DejaVu Sans, Noto Sans, Noto Sans CJK JP, Arial, sans-serif"

/* Starts a document of width x height pixels with a white background. */
void svg_begin(svg_t *s, double width, double height);
/* Appends printf-formatted text (numbers only: labels go through svg_text). */
void svg_printf(svg_t *s, const char *fmt, ...) AG_PRINTF(2, 3);
/* Appends text escaped for XML character data and attribute values: & < > "
   ' as entities, control characters dropped, invalid UTF-8 as U+FFFD. */
void svg_escaped(svg_t *s, const char *text);
/* <text x y [anchor] [extra attributes]>escaped text</text>. */
void svg_text(svg_t *s, double x, double y, double size, const char *anchor,
              const char *extra, const char *text);
/* Closes the document into *out (the text is handed over) or reports the
   failure; s is emptied either way. */
int svg_finish(svg_t *s, char **out, ag_error_t *err);
/* Drops a document begun but not finished. */
void svg_discard(svg_t *s);

/* Approximate width in pixels of text at font size `size` (wide for CJK). */
double svg_text_width(const char *text, double size);
/* "#rrggbb" of c into buf [8]. */
const char *svg_hex(ag_rgb_t c, char buf[8]);
/* Category k's colour (k >= 0): Tableau's ten categorical colours, distinct
   for most colour vision, in turn. */
const char *svg_category(int64_t k);
/* A short number for an axis or a data attribute: %.4g, with "-0" as "0". */
const char *svg_num(double x, char buf[32]);

/* Up to about `want` round tick values covering lo..hi: ticks[], their count. */
int svg_ticks(double lo, double hi, int want, double *ticks, int cap);

/* text cut to at most max_chars characters (an ellipsis marks a cut) into buf. */
const char *svg_clip(const char *text, int max_chars, char *buf, size_t size);
#endif
