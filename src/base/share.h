/*
 * The library's team under contention (share.c), as a step that tests can
 * drive: each window of the calling thread's time gives how long it was, how
 * long the thread waited for a core, and how many parallel regions began.
 */
#ifndef AG_SHARE_H
#define AG_SHARE_H

#include <stdint.h>

#define AG_I_SHARE_WINDOW_NS ((int64_t)20000000)          /* 20 ms */
#define AG_I_SHARE_PROBE_FIRST_NS ((int64_t)200000000)    /* 0.2 s */
#define AG_I_SHARE_PROBE_MAX_NS ((int64_t)2000000000)     /* 2 s */
/* a thread that waits this share of its time for a core has company */
#define AG_I_SHARE_BUSY 0.15
/* regions that begin at most this far apart (on the full team) are shorter
   than the scheduler's time slice: a thread that loses its core stalls its
   team for a slice at the next barrier, and a smaller team is faster; longer
   regions lose about the waiting thread's share, and keep the full team */
#define AG_I_SHARE_FINE_NS ((int64_t)2000000)              /* 2 ms */

/* a region that takes this long on one thread runs on the full team always:
   a thread that waits for its core delays it by about its share, and the
   team still gets more done (a GAT epoch beside a busy loop: 1.44x its quiet
   time on 2 threads, 1.76x on one) */
#define AG_I_SHARE_LONG_NS ((int64_t)2000000)              /* 2 ms */

typedef struct {
    int cap;              /* the team (0: the full team) */
    int probing;          /* the full team is on trial */
    int64_t pause;        /* before the next trial (0: none failed) */
    int64_t next_probe;   /* when the full team is tried again */
} ag_i_share_t;

typedef struct {
    int64_t span;      /* ns the window lasted */
    int64_t delay;     /* of which the calling thread waited for a core */
    int64_t regions;   /* parallel regions that began */
    int max;           /* the full team */
    int64_t end;       /* when it ended (ns, monotonic) */
} ag_i_share_window_t;

/* The team after window w (s updated): a smaller one while other programs
   keep the cores busy and the regions are short, the full one otherwise and
   on each trial. */
int ag_i_share_step(ag_i_share_t *s, const ag_i_share_window_t *w);

#endif
