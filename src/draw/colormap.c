/* Colour maps: viridis for weights, a neutral grey for "no edge". */
#include <math.h>

#include "draw/svg.h"

/* matplotlib's viridis at t = 0, 0.1, ..., 1 (its lightness rises throughout) */
static const ag_rgb_t viridis[11] = {
    {0x44, 0x01, 0x54}, {0x48, 0x24, 0x75}, {0x41, 0x44, 0x87}, {0x35, 0x5f, 0x8d},
    {0x2a, 0x78, 0x8e}, {0x21, 0x91, 0x8c}, {0x22, 0xa8, 0x84}, {0x44, 0xbf, 0x70},
    {0x7a, 0xd1, 0x51}, {0xbd, 0xdf, 0x26}, {0xfd, 0xe7, 0x25},
};

static uint8_t mix(uint8_t a, uint8_t b, double f)
{
    return (uint8_t)lround(a + (b - a) * f);
}

ag_rgb_t ag_colormap_viridis(double t)
{
    if (!(t > 0))
        t = 0;   /* NaN too */
    if (t > 1)
        t = 1;
    const double x = t * 10;
    int k = (int)floor(x);
    if (k > 9)
        k = 9;
    const double f = x - k;
    const ag_rgb_t a = viridis[k], b = viridis[k + 1];
    return (ag_rgb_t){mix(a.r, b.r, f), mix(a.g, b.g, f), mix(a.b, b.b, f)};
}

ag_rgb_t ag_colormap_nonedge(void)
{
    return (ag_rgb_t){0xd9, 0xd9, 0xd9};
}
