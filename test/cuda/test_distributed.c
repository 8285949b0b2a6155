/*
 * test_distributed.c — collectives on GPU arrays (include/emily_distributed.h)
 * against the same collectives on CPU arrays, same inputs.
 *
 *   TCP communicators (2 ranks as threads over loopback): GPU arrays go
 *   through host memory, so results must equal the CPU's bit for bit.
 *   NCCL with one rank (one GPU): every collective is the identity, exactly;
 *   when libnccl.so.2 cannot be found the family prints why and records
 *   nothing (set EMILY_NCCL_LIB, or pip install nvidia-nccl-cu13).
 */
#include "cuda_test.h"
#include "emily_distributed.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define FAM "distributed"

static em_array *on_gpu(em_array *a) {
    em_array *g = NULL;
    die_on(em_to_device(a, GPU, &g), "to_device");
    return g;
}

/* x of rank r: a [6, 4] f32 array of random values (seeded per rank). */
static em_array *rank_input(int r) {
    int64_t shape[2] = {6, 4};
    uint64_t saved = rng;
    rng = 0x1234u + (uint64_t)r * 977u;
    em_array *a = random_array(EM_F32, shape, 2, false, 0);
    rng = saved;
    return a;
}

typedef struct job {
    em_comm *comm;
    int rank;
    bool gpu;
    em_array *out[4]; /* all_sum, all_gather axis 1, reduce_scatter axis 1,
                         recv */
    em_status st;
} job;

static void *run_rank(void *p) {
    job *j = p;
    em_array *x = rank_input(j->rank), *xg = x;
    if (j->gpu)
        xg = on_gpu(x);
    int64_t shape[2] = {6, 4};
    em_array *sent = NULL;
    j->st = em_all_sum(xg, j->comm, &j->out[0]);
    if (j->st == EM_OK)
        j->st = em_all_gather(xg, j->comm, 1, &j->out[1]);
    if (j->st == EM_OK)
        j->st = em_reduce_scatter(xg, j->comm, 1, &j->out[2]);
    if (j->st == EM_OK)
        j->st = em_eval(j->out, 3);
    /* rank 0 sends, rank 1 receives (on its device) */
    if (j->st == EM_OK && j->rank == 0) {
        j->st = em_send(xg, j->comm, 1, &sent);
        if (j->st == EM_OK)
            j->st = em_eval(&sent, 1);
    } else if (j->st == EM_OK) {
        em_device old = em_set_default_device(j->gpu ? GPU : EM_DEVICE_CPU);
        j->st = em_recv(j->comm, 0, EM_F32, shape, 2, &j->out[3]);
        em_set_default_device(old);
        if (j->st == EM_OK)
            j->st = em_eval(&j->out[3], 1);
    }
    em_array_release(sent);
    if (xg != x)
        em_array_release(xg);
    em_array_release(x);
    return NULL;
}

static void make_pair(em_comm **c) {
    const char *hosts[2] = {"127.0.0.1", "127.0.0.1"};
    int ports[2];
    for (int r = 0; r < 2; r++)
        die_on(em_comm_listen("127.0.0.1", &c[r], &ports[r]), "comm_listen");
    for (int r = 0; r < 2; r++)
        die_on(em_comm_connect(c[r], r, 2, hosts, ports, NULL),
               "comm_connect");
}

static void run_pair(bool gpu, job *jobs) {
    em_comm *c[2] = {NULL, NULL};
    make_pair(c);
    pthread_t t[2];
    for (int r = 0; r < 2; r++) {
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r].comm = c[r];
        jobs[r].rank = r;
        jobs[r].gpu = gpu;
        pthread_create(&t[r], NULL, run_rank, &jobs[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(t[r], NULL);
    em_comm_release(c[0]);
    em_comm_release(c[1]);
}

static void test_tcp_gpu(void) {
    job cpu[2], gpu[2];
    run_pair(false, cpu);
    run_pair(true, gpu);
    static const char *names[4] = {"all_sum", "all_gather axis 1",
                                   "reduce_scatter axis 1", "send/recv"};
    for (int r = 0; r < 2; r++) {
        if (cpu[r].st != EM_OK || gpu[r].st != EM_OK) {
            record(FAM, "tcp: every rank evaluates", false, INFINITY);
            continue;
        }
        for (int k = 0; k < 4; k++) {
            if (!cpu[r].out[k])
                continue;
            char what[96];
            snprintf(what, sizeof what, "tcp rank %d %s (gpu through host)", r,
                     names[k]);
            /* the same host algorithm on the same bytes: exact */
            double worst = compare(cpu[r].out[k], gpu[r].out[k], what, 0.0);
            record(FAM, what, worst <= 1, worst);
        }
    }
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 4; k++) {
            em_array_release(cpu[r].out[k]);
            em_array_release(gpu[r].out[k]);
        }
}

static void test_nccl_one_rank(void) {
    uint8_t id[EM_NCCL_ID_BYTES];
    em_comm *comm = NULL;
    em_status st = em_comm_nccl_unique_id(GPU, id);
    if (st != EM_OK && strstr(em_last_error(), "NCCL is not available")) {
        printf("distributed: NCCL skipped: %s\n", em_last_error());
        return;
    }
    die_on(st, "comm_nccl_unique_id");
    if (st != EM_OK)
        return;
    die_on(em_comm_nccl_new(GPU, 0, 1, id, &comm), "comm_nccl_new");
    if (!comm)
        return;
    const em_dtype dtypes[] = {EM_F32, EM_F16, EM_BF16, EM_F64, EM_S32,
                               EM_U8, EM_C64, EM_PRED};
    for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++) {
        em_dtype d = dtypes[i];
        int64_t shape[3] = {3, 5, 4};
        em_array *x = random_array(d, shape, 3, false, d == EM_PRED ? 2 : 0);
        em_array *xg = on_gpu(x), *outs[4] = {NULL, NULL, NULL, NULL};
        die_on(em_all_sum(xg, comm, &outs[0]), "nccl all_sum");
        die_on(em_all_gather(xg, comm, 1, &outs[1]), "nccl all_gather");
        die_on(em_reduce_scatter(xg, comm, 2, &outs[2]), "nccl reduce_scatter");
        die_on(em_all_gather(xg, comm, 0, &outs[3]), "nccl all_gather 0");
        static const char *names[4] = {"all_sum", "all_gather axis 1",
                                       "reduce_scatter axis 2",
                                       "all_gather axis 0"};
        for (int k = 0; k < 4; k++) {
            if (!outs[k])
                continue;
            char what[96];
            snprintf(what, sizeof what, "nccl 1 rank %s %s (identity)",
                     em_dtype_name(d), names[k]);
            double worst = compare(x, outs[k], what, 0.0);
            record(FAM, what, worst <= 1, worst);
            em_array_release(outs[k]);
        }
        em_array_release(xg);
        em_array_release(x);
    }
    em_array *b = NULL;
    die_on(em_barrier(comm, &b), "nccl barrier");
    record(FAM, "nccl barrier", b && em_eval(&b, 1) == EM_OK, 0);
    em_array_release(b);
    /* arrays on another device are refused when the node is built */
    int64_t one = 1;
    float v = 1;
    em_array *cpu = NULL, *out = NULL;
    em_from_data(&v, 4, &one, 1, EM_F32, &cpu);
    st = em_all_sum(cpu, comm, &out);
    record(FAM, "nccl refuses a CPU array",
           st == EM_ERR_ARGUMENT && strstr(em_last_error(), "NCCL"), 0);
    em_array_release(out);
    em_array_release(cpu);
    em_comm_release(comm);
}

void test_distributed(void) {
    test_tcp_gpu();
    test_nccl_one_rank();
}
