# Tensor-parallel decode (examples/support/qwen3_tp.exs): greedy decoding
# of a Qwen3-0.6B-shaped model (28 layers, hidden 1024, 16 query / 8 KV
# heads of 128, MLP 3072, vocab 151,936, tied head, random bf16 weights,
# KV cache of 512 positions, batch 1) on 1 rank against n ranks, each rank
# a peer node of this VM on 127.0.0.1. Every step is one Emily.Compiler
# program with the collectives inside: 2 all_sums per block (after o_proj
# and down_proj) and one all_gather of the vocab-parallel logits.
#
#   mix run bench/tp_decode_bench.exs --gpu
#       2 GPUs: rank r on gpu:r, NCCL; the 1-rank run on gpu:0
#   mix run bench/tp_decode_bench.exs --layers 2 --hidden 256 --intermediate 512 \
#       --heads 4 --kv-heads 2 --head-dim 64 --vocab 8192 --tokens 16
#       CPU smoke run (TCP transport), well under a minute
#
# Options: --ranks N (2), --tokens N decoded (64), --prompt N prompt tokens
# (16), --runs N (3, the median is shown; one warm-up run compiles first),
# --max-len N (KV cache, 512), --cuda-graph (Emily.Compiler's cuda_graph:
# true; only the 1-rank program is captured: a collective node reads its
# communicator on the host, so a program with collectives falls back to
# the ordinary replay), --f32, --threads N (EMILY_NUM_THREADS of every
# rank's CPU thread pool, e.g. 1 on a 2-core machine: one core per rank),
# --lm-head vocab-parallel|replicated (the n ranks' LM head: a slice of
# the vocabulary each and an all_gather, the default, or the whole head on
# every rank), and the shapes --layers --hidden --heads --kv-heads --head-dim
# --intermediate --vocab (Qwen3-0.6B's by default).
#
# Decode tokens/s is (tokens - 1) / the time from the first token (read
# after the prefill step) to the last one; a rank's figure is its median
# over the runs, n ranks' figure is the slowest rank's. The table also says
# whether the n ranks generated the tokens of the single run (in bf16 they
# may part after a near-tie: the row-parallel sums round differently).
#
# On the 2-core development machine the ranks share the cores and the
# memory bandwidth (and each small TCP collective costs ~0.1 ms there):
# CPU figures show that it runs, not what 2 GPUs gain.

Code.require_file("../test/support/distributed_peers.exs", __DIR__)
model_modules = Code.require_file("../examples/support/qwen3_tp.exs", __DIR__)

{:module, _, ranks_binary, _} =
  defmodule TPDecodeBenchRanks do
    alias Examples.Qwen3TP

    # One rank's measurement: `nodes` nil is the single-process run.
    def run(nodes, opts) do
      config = opts[:config]
      {comm, device} = setup(nodes, opts)
      Nx.default_backend({Emily.Backend, device: device})
      params = config |> Qwen3TP.init_params(2026, device) |> Qwen3TP.shard_params(comm, config)

      step = Qwen3TP.step_fun(config, comm, device, cuda_graph: opts[:cuda_graph])

      prompt = for i <- 1..opts[:prompt], do: rem(i * 7919, config.vocab)

      generate = fn keep_logits ->
        if comm, do: :ok = Emily.Distributed.barrier(comm)
        cache = Qwen3TP.empty_cache(config, comm, device)

        Qwen3TP.generate(step, params, cache, prompt, opts[:tokens],
          config: config,
          device: device,
          keep_logits: keep_logits
        )
      end

      warm = generate.(true)
      runs = for _ <- 1..opts[:runs], do: generate.(false)

      median = fn key ->
        runs |> Enum.map(& &1[key]) |> Enum.sort() |> Enum.at(div(opts[:runs], 2))
      end

      %{
        tokens: warm.tokens,
        # the prefill step's logits, as f32
        first_logits: warm.logits |> hd() |> Nx.as_type(:f32) |> Nx.to_binary(),
        prefill_ms: median.(:prefill_us) / 1000,
        decode_ms: median.(:decode_us) / 1000,
        rank: if(comm, do: comm.rank, else: 0)
      }
    end

    defp setup(nil, opts), do: {nil, if(opts[:gpu], do: {:gpu, 0}, else: :cpu)}

    defp setup(nodes, opts) do
      rank = Enum.find_index(Enum.sort(nodes), &(&1 == node()))

      if opts[:gpu] do
        device = {:gpu, rank}
        {Emily.Distributed.init(nodes, name: :tp_bench, transport: :nccl, device: device), device}
      else
        {Emily.Distributed.init(nodes, name: :tp_bench), :cpu}
      end
    end
  end

{flags, _, _} =
  OptionParser.parse(System.argv(),
    strict: [
      gpu: :boolean,
      ranks: :integer,
      tokens: :integer,
      prompt: :integer,
      runs: :integer,
      max_len: :integer,
      cuda_graph: :boolean,
      f32: :boolean,
      threads: :integer,
      lm_head: :string,
      layers: :integer,
      hidden: :integer,
      heads: :integer,
      kv_heads: :integer,
      head_dim: :integer,
      intermediate: :integer,
      vocab: :integer
    ]
  )

lm_head =
  case flags[:lm_head] || "vocab-parallel" do
    "vocab-parallel" -> :vocab_parallel
    "replicated" -> :replicated
    other -> raise ArgumentError, "--lm-head: vocab-parallel or replicated, got: #{other}"
  end

shape_keys = [:layers, :hidden, :heads, :kv_heads, :head_dim, :intermediate, :vocab]

config =
  Examples.Qwen3TP.config(
    Keyword.take(flags, shape_keys) ++
      [
        max_len: flags[:max_len] || 512,
        type: if(flags[:f32], do: :f32, else: :bf16),
        lm_head: lm_head
      ]
  )

ranks = flags[:ranks] || 2
tokens = flags[:tokens] || 64

opts = [
  config: config,
  gpu: flags[:gpu] || false,
  cuda_graph: flags[:cuda_graph] || false,
  tokens: tokens,
  prompt: flags[:prompt] || 16,
  runs: flags[:runs] || 3
]

# The peer nodes are OS processes started from this one: they inherit its
# environment.
if flags[:threads], do: System.put_env("EMILY_NUM_THREADS", Integer.to_string(flags[:threads]))
peers = EmilyTest.DistributedPeers.start_peers(ranks)
nodes = Enum.map(peers, &elem(&1, 1))

for {module, binary} <- [{TPDecodeBenchRanks, ranks_binary} | model_modules],
    do: EmilyTest.DistributedPeers.load_module({:module, module, binary, nil}, nodes)

call = fn node, args -> :erpc.call(node, TPDecodeBenchRanks, :run, args, :infinity) end
single = call.(hd(Enum.sort(nodes)), [nil, opts])
multi = EmilyTest.DistributedPeers.on_all(nodes, &call.(&1, [nodes, opts]), :infinity)
EmilyTest.DistributedPeers.stop_peers(peers)

slowest = Enum.max_by(multi, & &1.decode_ms)
same_on_ranks = multi |> Enum.map(& &1.tokens) |> Enum.uniq() |> length() == 1

divergence =
  Enum.zip(single.tokens, hd(multi).tokens)
  |> Enum.find_index(fn {a, b} -> a != b end)

# How far the n ranks' first logits are from the single run's, against
# how far apart the single run's best two are.
floats = fn bin -> for <<v::float-32-native <- bin>>, do: v end
first_single = floats.(single.first_logits)
first_multi = floats.(hd(multi).first_logits)
logit_difference = Enum.zip_with(first_single, first_multi, &abs(&1 - &2)) |> Enum.max()
[best, second | _] = Enum.sort(first_single, :desc)

fmt = fn x, d -> :erlang.float_to_binary(x / 1, decimals: d) end
decoded = tokens - 1
tps = fn r -> decoded / (r.decode_ms / 1000) end

row = fn label, r ->
  String.pad_trailing(label, 34) <>
    String.pad_leading(fmt.(r.prefill_ms, 1), 12) <>
    String.pad_leading(fmt.(r.decode_ms / decoded, 2), 14) <>
    String.pad_leading(fmt.(tps.(r), 1), 12)
end

params_m =
  (config.vocab * config.hidden * if(config.tied, do: 1, else: 2) +
     config.layers *
       (config.hidden * config.head_dim * (2 * config.heads + 2 * config.kv_heads) +
          3 * config.hidden * config.intermediate)) / 1.0e6

transport =
  if opts[:gpu],
    do:
      "GPUs, rank r on gpu:r, NCCLfirst token's logits: max |1 rank - #{ranks} ranks| = #{Float.round(logit_difference, 6)}, \
1 rank's top-2 gap #{Float.round(best - second, 6)}
#{if opts[:cuda_graph], do: ", CUDA graph per step"}",
    else: "CPU, TCP over 127.0.0.1"

IO.puts("""

Tensor-parallel decode (#{transport}): #{config.layers} layers, hidden #{config.hidden}, \
#{config.heads}/#{config.kv_heads} heads of #{config.head_dim}, MLP #{config.intermediate}, \
vocab #{config.vocab} (LM head #{config.lm_head}), #{fmt.(params_m, 1)}M parameters, #{inspect(config.type)}, KV cache \
#{config.max_len}, prompt #{opts[:prompt]}, #{tokens} tokens, batch 1, median of #{opts[:runs]}

#{String.pad_trailing("", 34)}#{String.pad_leading("prefill ms", 12)}#{String.pad_leading("ms / token", 14)}#{String.pad_leading("tokens/s", 12)}
#{row.("1 rank", single)}
#{row.("#{ranks} ranks (slowest rank)", slowest)}

speed-up: #{fmt.(tps.(slowest) / tps.(single), 2)}x; ranks' tokens identical: #{same_on_ranks}; \
tokens of #{ranks} ranks = tokens of 1: #{if divergence, do: "no (first differs at #{divergence})", else: "yes"}
first token's logits: max |1 rank - #{ranks} ranks| = #{Float.round(logit_difference, 6)}, \
1 rank's top-2 gap #{Float.round(best - second, 6)}
#{if opts[:cuda_graph], do: "CUDA graphs: the 1-rank step only (programs with collectives replay the ordinary way)\n", else: ""}\
machine: #{System.schedulers_online()} schedulers online#{if opts[:gpu], do: "", else: ", ranks share the cores"}; \
CPU threads per rank: #{flags[:threads] || "all cores"}\
""")
