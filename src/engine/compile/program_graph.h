/*
 * program_graph.h — programs replayed as one CUDA graph (program_graph.c;
 * the user-visible behaviour is described in include/emily_compile.h,
 * "CUDA graphs"), and what it reads of the program (program.c).
 */
#ifndef EMILY_PROGRAM_GRAPH_H
#define EMILY_PROGRAM_GRAPH_H

#include "tape.h"

typedef struct em__program_graph em__program_graph;

/* The graph state of a program built with cuda_graph: PENDING when the
 * program can be captured, else FALLBACK with the reason. */
em_status em__program_graph_new(em_program *p, em__program_graph **out);
/* Frees the graph, its device memory and its buffers (NULL is allowed). */
void em__program_graph_free(em__program_graph *g);
/* Whether runs go through the graph node (PENDING or CAPTURED). */
bool em__program_graph_usable(em__program_graph *g);
/* em_program_run through one cuda_graph node (inputs checked here). */
em_status em__program_graph_run(em_program *p, em__program_graph *g,
                                em_array *const *inputs, size_t n_in,
                                em_array **outputs_out);
/* Fill the cuda_graph fields of stats (nothing when g is NULL). */
void em__program_graph_stats(em__program_graph *g, em_program_stats *out);

/* program.c: the ordinary replay, and the parts of a program read here. */
/* replace: NULL, or per tape node an evaluated array used instead of its
 * clone (NULL entries are cloned as usual). */
em_status em__program_run_plain(em_program *p, em_array *const *inputs,
                                size_t n_in, em_array *const *replace,
                                em_array **outputs_out);
em_status em__program_check_input(const em_program *p, size_t i,
                                  const em_array *given);
const em__tape *em__program_tape(const em_program *p);
size_t em__program_num_constants(const em_program *p);
em_array *em__program_constant(const em_program *p, size_t i);
em__program_graph *em__program_graph_of(const em_program *p);
/* The value slot of output i (< inputs + constants: not a tape node). */
size_t em__program_output_slot(const em_program *p, size_t i);

#endif
