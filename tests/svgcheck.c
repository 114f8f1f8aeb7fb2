/* Helpers of the picture tests: SVG through libxml2, PNG through zlib. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <libxml/xpathInternals.h>

#include "svgcheck.h"
#include "testutil.h"

xmlDocPtr svg_parse(const char *svg)
{
    ck_assert_ptr_nonnull(svg);
    xmlDocPtr doc = xmlReadMemory(svg, (int)strlen(svg), "picture.svg", "UTF-8",
                                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    ck_assert_msg(doc != NULL, "the picture is not well-formed XML");
    xmlNodePtr root = xmlDocGetRootElement(doc);
    ck_assert_msg(root && strcmp((const char *)root->name, "svg") == 0, "the root is not <svg>");
    ck_assert_msg(root->ns && strcmp((const char *)root->ns->href,
                                     "http://www.w3.org/2000/svg") == 0, "no SVG namespace");
    return doc;
}

xmlXPathObjectPtr svg_nodes(xmlDocPtr doc, const char *xpath)
{
    xmlXPathContextPtr cx = xmlXPathNewContext(doc);
    xmlXPathRegisterNs(cx, BAD_CAST "s", BAD_CAST "http://www.w3.org/2000/svg");
    xmlXPathObjectPtr r = xmlXPathEvalExpression(BAD_CAST xpath, cx);
    xmlXPathFreeContext(cx);
    ck_assert_msg(r != NULL, "bad xpath %s", xpath);
    return r;
}

int svg_count(xmlDocPtr doc, const char *xpath)
{
    xmlXPathObjectPtr r = svg_nodes(doc, xpath);
    int n = r->nodesetval ? r->nodesetval->nodeNr : 0;
    xmlXPathFreeObject(r);
    return n;
}

const char *svg_attr(xmlNodePtr node, const char *name, char *buf, size_t size)
{
    xmlChar *v = xmlGetProp(node, BAD_CAST name);
    snprintf(buf, size, "%s", v ? (const char *)v : "");
    xmlFree(v);
    return buf;
}

double svg_num_attr(xmlNodePtr node, const char *name)
{
    char buf[64], *end;
    svg_attr(node, name, buf, sizeof buf);
    double x = strtod(buf, &end);
    ck_assert_msg(*buf && !*end, "attribute %s='%s' is not a number", name, buf);
    return x;
}

void svg_size(xmlDocPtr doc, double *width, double *height)
{
    xmlNodePtr root = xmlDocGetRootElement(doc);
    *width = svg_num_attr(root, "width");
    *height = svg_num_attr(root, "height");
}

double svg_luminance(const char *hex)
{
    unsigned r, g, b;
    ck_assert_msg(sscanf(hex, "#%2x%2x%2x", &r, &g, &b) == 3, "colour '%s'", hex);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c)
{
    const int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

void png_read_info(const char *path, png_info_t *info)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: not there", path);
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    rewind(f);
    unsigned char *png = malloc((size_t)size), *idat = malloc((size_t)size);
    ck_assert_int_eq(fread(png, 1, (size_t)size, f), size);
    fclose(f);
    ck_assert_msg(size > 33 && memcmp(png, "\x89PNG\r\n\x1a\n", 8) == 0, "%s: not a PNG", path);
    long w = 0, h = 0, n_idat = 0;
    int channels = 0;
    for (long at = 8; at + 12 <= size;) {
        const uint32_t len = be32(png + at);
        const unsigned char *type = png + at + 4, *data = png + at + 8;
        ck_assert_msg(at + 12 + (long)len <= size, "%s: truncated chunk", path);
        if (!memcmp(type, "IHDR", 4)) {
            w = be32(data), h = be32(data + 4);
            ck_assert_msg(data[8] == 8 && (data[9] == 2 || data[9] == 6) && data[12] == 0,
                          "%s: not 8-bit RGB(A), non-interlaced", path);
            channels = data[9] == 6 ? 4 : 3;
        } else if (!memcmp(type, "IDAT", 4)) {
            memcpy(idat + n_idat, data, len);
            n_idat += len;
        }
        at += 12 + (long)len;
    }
    ck_assert_msg(w > 0 && h > 0 && channels, "%s: no IHDR", path);
    const size_t stride = (size_t)w * (size_t)channels;
    uLongf raw_len = (uLongf)((stride + 1) * (size_t)h);
    unsigned char *raw = malloc(raw_len), *px = calloc((size_t)h, stride);
    ck_assert_msg(uncompress(raw, &raw_len, idat, (uLong)n_idat) == Z_OK &&
                  raw_len == (stride + 1) * (size_t)h, "%s: bad image data", path);
    for (long y = 0; y < h; y++) {   /* undo the row filters */
        const unsigned char *in = raw + (size_t)y * (stride + 1) + 1;
        unsigned char *row = px + (size_t)y * stride, *up = y ? row - stride : NULL;
        const int filter = in[-1];
        for (size_t x = 0; x < stride; x++) {
            const int a = x >= (size_t)channels ? row[x - channels] : 0, b = up ? up[x] : 0;
            const int c = up && x >= (size_t)channels ? up[x - channels] : 0;
            const int pred = filter == 1 ? a : filter == 2 ? b : filter == 3 ? (a + b) / 2
                           : filter == 4 ? paeth(a, b, c) : 0;
            row[x] = (unsigned char)(in[x] + pred);
        }
    }
    uint32_t seen[1000];
    int n_seen = 0;
    long inked = 0;
    for (long p = 0; p < w * h; p++) {
        const unsigned char *q = px + (size_t)p * (size_t)channels;
        const int alpha = channels == 4 ? q[3] : 255;
        const uint32_t c = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 |
                           (uint32_t)alpha;
        inked += alpha > 0 && !(q[0] == 255 && q[1] == 255 && q[2] == 255);
        int k = 0;
        while (k < n_seen && seen[k] != c)
            k++;
        if (k == n_seen && n_seen < 1000)
            seen[n_seen++] = c;
    }
    info->width = w, info->height = h, info->colours = n_seen;
    info->inked = (double)inked / (double)(w * h);
    free(png), free(idat), free(raw), free(px);
}

void render_png(const char *svg_path, const char *png_path)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rsvg-convert '%s' -o '%s' 2>&1", svg_path, png_path);
    const int rc = system(cmd);
    ck_assert_msg(rc == 0, "rsvg-convert failed on %s (is librsvg2-bin installed? make deps)",
                  svg_path);
}
