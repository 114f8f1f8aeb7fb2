/* Helpers of the picture tests: SVG parsed with libxml2, PNG decoded with zlib. */
#ifndef AG_SVGCHECK_H
#define AG_SVGCHECK_H

#include <libxml/parser.h>
#include <libxml/xpath.h>

/* Parses svg (asserting well-formed XML with an <svg> root); free with xmlFreeDoc. */
xmlDocPtr svg_parse(const char *svg);
/* The nodes matching xpath (the SVG namespace is prefix s:); free with
   xmlXPathFreeObject. */
xmlXPathObjectPtr svg_nodes(xmlDocPtr doc, const char *xpath);
int svg_count(xmlDocPtr doc, const char *xpath);
/* A numeric attribute (asserting it is there and a number). */
double svg_num_attr(xmlNodePtr node, const char *name);
/* An attribute's text into buf ("" when missing). */
const char *svg_attr(xmlNodePtr node, const char *name, char *buf, size_t size);
/* The root's width and height. */
void svg_size(xmlDocPtr doc, double *width, double *height);
/* Relative luminance of "#rrggbb". */
double svg_luminance(const char *hex);

/* A PNG's size, and how much of it is drawn: the number of distinct colours
   (up to 1000) and the fraction of pixels that are not white. Asserts a valid
   8-bit RGB or RGBA PNG. */
typedef struct {
    long width, height;
    int colours;
    double inked;
} png_info_t;
void png_read_info(const char *path, png_info_t *info);
/* Renders svg_path to png_path with rsvg-convert (asserting it succeeded). */
void render_png(const char *svg_path, const char *png_path);

#endif
