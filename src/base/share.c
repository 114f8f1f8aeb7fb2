/*
 * Threads that share the machine: how many the library's parallel regions
 * use when nobody chose.
 *
 * Measured (2 cores, lm train's quiet step 26 ms on Zen 5, 49 ms on Emerald
 * Rapids): two copies at once took 150x (Zen 5) and 67x (Emerald Rapids)
 * their quiet step; one copy beside a one-thread busy loop 2-2.4x. libgomp's
 * threads wait at every barrier by spinning (GOMP_SPINCOUNT, 300,000 pauses:
 * 5-15 ms), so a team whose other thread lost its core to another program
 * burns the core that thread needs, at each of a step's hundreds of regions.
 * Passive waiting (OMP_WAIT_POLICY=passive) cures it but costs a quiet run
 * 80%, and nothing a library does after libgomp has loaded changes libgomp's
 * waiting. What cures it without costing a quiet run is a smaller team: one
 * thread has no barrier to wait at.
 *
 * So the library watches whether its threads get the cores they ask for: the
 * calling thread's run delay (the kernel's schedstat: time runnable but
 * waiting for a core) over windows of 20 ms (share.h). With T threads beside
 * L runnable threads of other programs on c cores, each thread waits a share
 * f = 1 - c / (T + L) of its time, so f tells L, and the team shrinks to the
 * cores the others leave (at least one). A smaller team cannot see whether
 * the others have gone, so the full team is tried again after a pause that
 * doubles with each try that finds the machine still busy (0.2 s to 2 s).
 * Only a team of short regions shrinks: regions longer than the scheduler's
 * time slice lose little to a thread that waits for its core (a GAT epoch of
 * 2.2M messages beside a busy loop: 1.44x its quiet time on 2 threads, 1.76x
 * on one). The results are the same bits for any team (core.h), so this
 * changes how fast a call runs, never what it computes. The command-line
 * tools also shorten libgomp's spinning (cli/waits.c); a library cannot, as
 * libgomp reads it once, when it loads.
 *
 * A count the user chose is kept as it is: OMP_NUM_THREADS, ag_set_threads
 * with a count, the calling thread's OpenMP count set to other than the
 * cores (by the host program), or AG_THREADS_FIXED=1 in the environment. A
 * count a tool chose as its default (attngraph-mpi's cores per process) is
 * the most the team takes, and adapts below it.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "base/base.h"
#include "base/share.h"

/* who chose the count (ag_i_threads_choice) */
static atomic_int threads_choice;
/* the OpenMP count when the library loaded: the cores, or OMP_NUM_THREADS */
static int threads_default;

#ifdef _OPENMP
/* the team now (0: the full team); -1: no run delay to read, no adapting */
static atomic_int team_cap;
static pthread_mutex_t share_lock = PTHREAD_MUTEX_INITIALIZER;
static ag_i_share_t share;   /* under share_lock */

/* the calling thread's window */
static _Thread_local int64_t window_start, window_delay, window_regions;

__attribute__((constructor)) static void read_default(void)
{
    threads_default = omp_get_max_threads();
}
#endif

int ag_i_default_threads(void)
{
    return threads_default > 0 ? threads_default : 1;
}

int ag_i_share_step(ag_i_share_t *s, const ag_i_share_window_t *w)
{
    const int team = s->cap > 0 && s->cap < w->max ? s->cap : w->max;
    const double f = w->span > 0 ? (double)w->delay / (double)w->span : 0;
    /* short regions: each begins within AG_I_SHARE_FINE_NS of the last (as on the
       full team) */
    const int fine = (double)w->span * team / w->max < (double)AG_I_SHARE_FINE_NS * w->regions;
    if (!fine) {
        s->cap = 0;   /* long regions: the full team gets more done, busy cores or not */
        s->probing = 0;
    } else if (f >= AG_I_SHARE_BUSY) {
        /* the others' runnable threads, from f = 1 - max / (team + others) */
        const double others = w->max / (1.0 - (f < 0.95 ? f : 0.95)) - team;
        const int fit = (int)(w->max - others + 0.5);
        if ((fit < 1 ? 1 : fit) < team) {
            s->cap = fit < 1 ? 1 : fit;
            if (s->probing || !s->pause)   /* a try that failed waits longer next time */
                s->pause = !s->pause ? AG_I_SHARE_PROBE_FIRST_NS
                         : s->pause * 2 < AG_I_SHARE_PROBE_MAX_NS ? s->pause * 2
                                                                  : AG_I_SHARE_PROBE_MAX_NS;
            s->next_probe = w->end + s->pause;
        }
        s->probing = 0;
    } else if (s->probing) {
        s->probing = 0;   /* the full team had its cores: start afresh next time */
        s->pause = 0;
    } else if (s->cap > 0 && w->end >= s->next_probe) {
        s->cap = 0;   /* try the full team */
        s->probing = 1;
    }
    if (s->cap >= w->max)
        s->cap = 0;
    return s->cap > 0 ? s->cap : w->max;
}

static int user_chose(int max)
{
    static atomic_int env = -1;   /* -1: not read yet */
    const int choice = atomic_load_explicit(&threads_choice, memory_order_relaxed);
    if (choice != AG_I_THREADS_DEFAULT)
        return choice == AG_I_THREADS_USER;
    int e = atomic_load_explicit(&env, memory_order_relaxed);
    if (e < 0) {
        const char *fixed = getenv("AG_THREADS_FIXED");
        e = getenv("OMP_NUM_THREADS") || (fixed && *fixed && strcmp(fixed, "0") != 0);
        atomic_store_explicit(&env, e, memory_order_relaxed);
    }
    return e || max != ag_i_default_threads();   /* the host set its own count */
}

#ifdef _OPENMP
static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The calling thread's run delay in ns (its schedstat's second field), -1 if
   the kernel does not keep it. */
static int64_t run_delay(void)
{
    const int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[96];
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *end, *next;
    strtoll(buf, &end, 10);
    const long long delay = strtoll(end, &next, 10);
    return next == end ? -1 : (int64_t)delay;
}

int ag_i_threads_adapt(void)
{
    return !user_chose(omp_get_max_threads());
}

int ag_i_max_threads(void)
{
    const int max = omp_get_max_threads();
    if (max <= 1 || omp_in_parallel() || user_chose(max))
        return max;
    const int cap = atomic_load_explicit(&team_cap, memory_order_relaxed);
    if (cap < 0)
        return max;
    const int team = cap > 0 && cap < max ? cap : max;
    const int64_t now = now_ns();
    window_regions++;
    if (window_start && now - window_start < AG_I_SHARE_WINDOW_NS)
        return team;
    const int64_t delay = run_delay();
    if (delay < 0) {
        atomic_store_explicit(&team_cap, -1, memory_order_relaxed);
        return max;
    }
    int now_team = team;
    if (window_start && pthread_mutex_trylock(&share_lock) == 0) {   /* else another decides */
        const ag_i_share_window_t w = {now - window_start, delay - window_delay,
                                       window_regions, max, now};
        share.cap = cap;
        now_team = ag_i_share_step(&share, &w);
        atomic_store_explicit(&team_cap, share.cap, memory_order_relaxed);
        pthread_mutex_unlock(&share_lock);
    }
    window_start = now, window_delay = delay, window_regions = 0;
    return now_team;
}

int ag_i_team(double ns)
{
    const int team = ag_i_max_threads();   /* counts the region in the window */
    return ns >= (double)AG_I_SHARE_LONG_NS ? omp_get_max_threads() : team;
}
#else
int ag_i_threads_adapt(void)
{
    return !user_chose(1);
}

int ag_i_max_threads(void)
{
    return 1;
}

int ag_i_team(double ns)
{
    (void)ns;
    return 1;
}
#endif

void ag_i_threads_choice(int choice)
{
    atomic_store_explicit(&threads_choice, choice, memory_order_relaxed);
}
