/*
 * attention_params.h — the parameters of the sdpa node (ops/attention.c),
 * shared with its vjp rule and its GPU eval. Inputs: q, k, v, then the
 * mask when mask_kind != SDPA_MASK_NONE, then the sinks when has_sinks.
 */
#ifndef EMILY_ATTENTION_PARAMS_H
#define EMILY_ATTENTION_PARAMS_H

enum sdpa_mask_kind {
    SDPA_MASK_NONE = 0,
    SDPA_MASK_ADDITIVE = 1, /* of q's dtype, added to the scaled scores */
    SDPA_MASK_BOOL = 2,     /* pred: false masks the key out */
};

typedef struct sdpa_params {
    double scale; /* resolved: never 0 for "default" */
    int causal;
    int mask_kind; /* enum sdpa_mask_kind */
    int has_sinks;
} sdpa_params;

#include "internal.h"

/* The sdpa primitive's rules, declared here rather than in internal.h so
 * that the family stays in its own files. */
em_status em__vjp_sdpa(em_array *, em_array *, const bool *, em_array **);
em_status em__gpu_sdpa_eval(em_array *node); /* gpu/gpu_attention.c */

#endif
