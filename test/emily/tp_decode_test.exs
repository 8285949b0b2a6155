Code.require_file("../support/distributed_peers.exs", __DIR__)

Code.require_file("../support/tp_decode_ranks.exs", __DIR__)

defmodule Emily.TPDecodeTest do
  # Starts distribution and peer nodes.
  use ExUnit.Case, async: false

  alias EmilyTest.DistributedPeers, as: Peers
  alias EmilyTest.TPDecodeRanks, as: Ranks

  @moduletag timeout: 120_000
  @tokens 16

  setup_all do
    peers = Peers.start_peers(2)
    nodes = Enum.map(peers, &elem(&1, 1))

    for {module, binary} <- :persistent_term.get({EmilyTest.TPDecodeRanks, :modules}),
        do: Peers.load_module({:module, module, binary, nil}, nodes)

    on_exit(fn -> Peers.stop_peers(peers) end)
    %{nodes: nodes}
  end

  defp max_difference(a, b), do: Ranks.max_difference(a, b)

  test "2 ranks generate the tokens of 1, with bit-identical logits on both ranks", %{
    nodes: nodes
  } do
    [r0, r1] =
      Peers.on_all(nodes, &:erpc.call(&1, Ranks, :tensor_parallel, [nodes, @tokens], 60_000))

    single = Ranks.generate(nil, @tokens)

    assert length(single.tokens) == @tokens
    # a random model that does not just repeat one token
    assert length(Enum.uniq(single.tokens)) > 4

    # both ranks: the same tokens and the same bytes (every all_sum and the
    # all_gather copy one result to every rank)
    assert {r0.rank, r1.rank} == {0, 1}
    assert r0.tokens == r1.tokens
    assert r0.logits == r1.logits

    # each rank compiled two programs, the prefill (5 tokens) and the decode
    # step, collectives inside (not the evaluator's op-by-op fallback)
    for res <- [r0, r1] do
      assert [%{mode: :program}, %{mode: :program}] = res.compiled
    end

    # one process: the same tokens; logits within float rounding, not
    # bitwise: the row-parallel o_proj and down_proj products are summed
    # over half of the features on each rank and the halves added, where
    # one process sums all the features in one reduction
    assert r0.tokens == single.tokens

    differences =
      for {a, b} <- Enum.zip(single.logits, r0.logits) do
        assert byte_size(a) == 97 * 4
        max_difference(a, b)
      end

    assert Enum.max(differences) < 1.0e-4

    # and each token wins by far more than that rounding (so the tokens do
    # not hinge on it, on any SIMD path): the smallest gap between the top
    # two logits of a step, ~1.5e-3 here
    top_two_gap = fn logits ->
      [first, second | _] = logits |> Ranks.floats() |> Enum.sort(:desc)
      first - second
    end

    assert single.logits |> Enum.map(top_two_gap) |> Enum.min() > 10 * Enum.max(differences)
  end

  test "an untied LM head, 2 ranks against 1", %{nodes: nodes} do
    opts = [config: [tied: false], name: :tp_untied]

    [r0, r1] =
      Peers.on_all(nodes, &:erpc.call(&1, Ranks, :tensor_parallel, [nodes, 8, opts], 60_000))

    single = Ranks.generate(nil, 8, :cpu, tied: false)
    assert r0.logits == r1.logits
    assert r0.tokens == single.tokens
    # another head than the tied run's
    assert single.tokens != Enum.take(Ranks.generate(nil, 8).tokens, 8)

    for {a, b} <- Enum.zip(single.logits, r0.logits),
        do: assert(max_difference(a, b) < 1.0e-4)
  end

  test "a replicated LM head, 2 ranks against 1", %{nodes: nodes} do
    opts = [config: [lm_head: :replicated], name: :tp_replicated]

    [r0, r1] =
      Peers.on_all(nodes, &:erpc.call(&1, Ranks, :tensor_parallel, [nodes, 8, opts], 60_000))

    single = Ranks.generate(nil, 8)
    assert r0.logits == r1.logits
    assert r0.tokens == single.tokens

    for {a, b} <- Enum.zip(single.logits, r0.logits),
        do: assert(max_difference(a, b) < 1.0e-4)
  end

  test "decoding through the KV cache matches one step over the whole sequence" do
    %{tokens: tokens, logits: logits} = Ranks.generate(nil, 6)
    # the last decode step saw the prompt and the first 5 generated tokens
    full = Ranks.full_sequence_logits(Ranks.prompt() ++ Enum.take(tokens, 5))
    assert max_difference(List.last(logits), full) < 1.0e-4
  end

  test "Emily.Distributed.shard/3 cuts this rank's contiguous part" do
    comm = Emily.Distributed.single()
    x = Nx.iota({2, 6}, backend: Emily.Backend)
    assert Emily.Distributed.shard(x, nil, 1) == x
    assert Nx.to_list(Emily.Distributed.shard(x, comm, 0)) == Nx.to_list(x)

    second_of_three = %{comm | rank: 1, size: 3}
    assert Nx.to_list(Emily.Distributed.shard(x, second_of_three, 1)) == [[2, 3], [8, 9]]
    assert Nx.to_list(Emily.Distributed.shard(x, second_of_three, -1)) == [[2, 3], [8, 9]]

    assert_raise ArgumentError,
                 ~r/shard: axis 0 of \{2, 6\} must be divisible by the number of ranks 3/,
                 fn ->
                   Emily.Distributed.shard(x, second_of_three, 0)
                 end

    assert_raise ArgumentError, ~r/shard: axis 2 is out of range/, fn ->
      Emily.Distributed.shard(x, comm, 2)
    end
  end

  # Bumblebee's Qwen3 (Axon) on the same weights: the decoder is Qwen3.
  test "the decoder computes Bumblebee's Qwen3 logits" do
    Nx.default_backend(Emily.Backend)
    config = Ranks.config()
    params = Examples.Qwen3TP.init_params(config, 7)

    spec =
      Bumblebee.configure(Bumblebee.Text.Qwen3,
        architecture: :for_causal_language_modeling,
        vocab_size: config.vocab,
        max_positions: config.max_len,
        hidden_size: config.hidden,
        intermediate_size: config.intermediate,
        attention_head_size: config.head_dim,
        num_blocks: config.layers,
        num_attention_heads: config.heads,
        num_key_value_heads: config.kv_heads,
        rotary_embedding_base: config.rope_base,
        layer_norm_epsilon: config.eps,
        tie_word_embeddings: config.tied
      )

    model = Bumblebee.build_model(spec)
    state = Axon.trace_init(model, %{"input_ids" => Nx.template({1, 1}, :s64)})
    ids = Ranks.prompt() ++ [1, 2, 96]

    expected =
      Axon.predict(
        model,
        %{state | data: axon_params(params)},
        %{"input_ids" => Nx.tensor([ids])},
        compiler: Emily.Compiler
      ).logits[[0, -1]]

    got = Ranks.full_sequence_logits(ids)
    assert max_difference(Nx.to_binary(expected), got) < 1.0e-4
  end

  defp axon_params(p) do
    blocks =
      p.layers
      |> Tuple.to_list()
      |> Enum.with_index()
      |> Enum.flat_map(fn {l, i} ->
        b = "decoder.blocks.#{i}."

        [
          {b <> "self_attention_norm", "weight", l.input_norm},
          {b <> "self_attention.query", "kernel", l.q},
          {b <> "self_attention.key", "kernel", l.k},
          {b <> "self_attention.value", "kernel", l.v},
          {b <> "self_attention.query_norm", "weight", l.q_norm},
          {b <> "self_attention.key_norm", "weight", l.k_norm},
          {b <> "self_attention.output", "kernel", l.o},
          {b <> "output_norm", "weight", l.post_norm},
          {b <> "ffn.gate", "kernel", l.gate},
          {b <> "ffn.intermediate", "kernel", l.up},
          {b <> "ffn.output", "kernel", l.down}
        ]
      end)

    (blocks ++
       [
         {"embedder.token_embedding", "kernel", p.embed},
         {"language_modeling_head.output", "kernel", p.head},
         {"output_norm", "weight", p.final_norm}
       ])
    |> Map.new(fn {layer, name, t} -> {layer, %{name => t}} end)
  end
end
