/* Wall-clock timing for the benchmarks. */
#ifndef AG_TIMING_H
#define AG_TIMING_H

/* Seconds on a monotonic clock. */
double now_s(void);
/* Sorts t[0..n) and returns its median. */
double median_s(double *t, int n);

#endif
