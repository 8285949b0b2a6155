# What each rank of the tensor-parallel decode tests runs (the decoder is
# examples/support/qwen3_tp.exs). Loaded once per VM by the test files that
# need it; the object code of both, to ship to peer nodes, is kept under
# {EmilyTest.TPDecodeRanks, :modules} in :persistent_term.
model_modules = Code.require_file("../../examples/support/qwen3_tp.exs", __DIR__)

{:module, ranks_module, ranks_binary, _} =
  defmodule EmilyTest.TPDecodeRanks do
    @moduledoc false
    alias Examples.Qwen3TP

    # 2 layers, hidden 64, 4 query / 2 KV heads of 16, MLP 128, vocab 97
    # (not a multiple of 2: the vocab-parallel head is padded), tied head,
    # f32. Weights wider than Qwen3's 0.02 so that the random model does not
    # settle on repeating one token (a stronger check of the 16 tokens).
    def config(overrides \\ []),
      do:
        Qwen3TP.config(
          layers: 2,
          hidden: 64,
          heads: 4,
          kv_heads: 2,
          head_dim: 16,
          intermediate: 128,
          vocab: 97,
          type: :f32,
          max_len: 32,
          init_std: 0.3
        )
        |> Map.merge(Map.new(overrides))

    def prompt, do: [3, 14, 15, 92, 65]

    # Greedy generation on `comm` (nil: this process alone) on `device`: the
    # tokens and each step's logits as binaries.
    # `overrides` change the config (e.g. tied: false).
    def generate(comm, count, device \\ :cpu, overrides \\ []) do
      Nx.default_backend({Emily.Backend, device: device})
      config = config(overrides)

      params =
        config |> Qwen3TP.init_params(7, device) |> Qwen3TP.shard_params(comm, config)

      step = Qwen3TP.step_fun(config, comm, device)
      cache = Qwen3TP.empty_cache(config, comm, device)

      {result, compiled} =
        with_compile_events(fn ->
          Qwen3TP.generate(step, params, cache, prompt(), count,
            config: config,
            device: device,
            keep_logits: true
          )
        end)

      %{
        tokens: result.tokens,
        logits: Enum.map(result.logits, &Nx.to_binary/1),
        compiled: compiled
      }
    end

    # Runs fun; the metadata of the Emily.Compiler compilations it made in
    # this process.
    defp with_compile_events(fun) do
      me = self()
      id = {__MODULE__, make_ref()}

      :ok =
        :telemetry.attach(
          id,
          [:emily, :defn, :compile],
          fn _event, _measurements, meta, _ ->
            if self() == me, do: send(me, {id, meta})
          end,
          nil
        )

      try do
        result = fun.()
        {result, collect(id)}
      after
        :telemetry.detach(id)
      end
    end

    defp collect(id) do
      receive do
        {^id, meta} -> [meta | collect(id)]
      after
        0 -> []
      end
    end

    # `:devices`: rank r's device is the r-th (default: all on the CPU);
    # `:transport`: Emily.Distributed.init's (with :nccl, the rank's device);
    # `:config`: overrides of the config.
    def tensor_parallel(nodes, count, opts \\ []) do
      rank = Enum.find_index(Enum.sort(nodes), &(&1 == node()))
      device = opts |> Keyword.get(:devices, List.duplicate(:cpu, length(nodes))) |> Enum.at(rank)
      transport = Keyword.get(opts, :transport, :tcp)
      init_opts = [name: Keyword.get(opts, :name, :tp_decode), transport: transport]
      init_opts = if transport == :nccl, do: [device: device] ++ init_opts, else: init_opts
      comm = Emily.Distributed.init(nodes, init_opts)
      Map.put(generate(comm, count, device, Keyword.get(opts, :config, [])), :rank, comm.rank)
    end

    # The logits of the last position of one step over the whole sequence
    # from position 0 (no cache reuse): what decoding through the cache
    # must reproduce.
    def full_sequence_logits(ids) do
      Nx.default_backend(Emily.Backend)
      config = config()
      params = config |> Qwen3TP.init_params(7) |> Qwen3TP.shard_params(nil, config)
      step = Qwen3TP.step_fun(config, nil)
      ids = Nx.tensor([ids], type: :s32)

      {logits, _token, _cache, _offset} =
        step.(params, Qwen3TP.empty_cache(config, nil), ids, Nx.tensor(0, type: :s32))

      Nx.to_binary(logits)
    end

    def floats(binary), do: for(<<v::float-32-native <- binary>>, do: v)

    def max_difference(a, b),
      do: Enum.zip_with(floats(a), floats(b), &abs(&1 - &2)) |> Enum.max()
  end

:persistent_term.put({EmilyTest.TPDecodeRanks, :modules}, [
  {ranks_module, ranks_binary} | model_modules
])
