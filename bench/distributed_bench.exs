# Emily.Distributed: all_sum bus bandwidth and data-parallel step time,
# with ranks as peer nodes of this VM on 127.0.0.1.
#
#   mix run bench/distributed_bench.exs            TCP ring, CPU tensors, 2 ranks
#   mix run bench/distributed_bench.exs --nccl     NCCL, rank r on gpu:r (needs
#                                                  as many GPUs as ranks)
#   options: --ranks N (default 2), --max-mb M (largest message, default 64),
#            --csv (machine-readable lines for bench/nccl_allreduce_torch.py)
#
# Bus bandwidth as nccl-tests reports it for all-reduce:
#   busbw = 2 (n - 1) / n * bytes / time
# (the bytes each rank's link carries). Each size: a barrier, 2 warm-up
# calls, then as many timed calls as fit in ~0.3 s (at least 3); the time
# is the slowest rank's mean. The data-parallel step is the digits-sized
# MLP (64-128-10, synthetic data) trained with a global batch of 512 split
# over the ranks, gradients all_mean'ed inside the compiled step, against
# one process on the whole batch.
#
# On the 2-core development machine both ranks (and the test VM) share the
# two cores: loopback figures there measure memory copies and scheduling
# more than a network, and 2 processes cannot beat 1 at step time.

Code.require_file("../test/support/distributed_peers.exs", __DIR__)

{:module, _, bench_binary, _} =
  defmodule DistributedBenchRanks do
    import Nx.Defn
    alias Emily.Distributed

    def all_sum_sweep(nodes, opts) do
      comm = Distributed.init(nodes, Keyword.merge([name: :bench], opts[:init]))
      backend = opts[:backend]

      for bytes <- opts[:sizes] do
        x = Nx.iota({div(bytes, 4)}, type: :f32, backend: backend)
        Emily.eval(x.data.ref)
        :ok = Distributed.barrier(comm)
        for _ <- 1..2, do: Distributed.all_sum(x, comm)
        :ok = Distributed.barrier(comm)
        # the number of calls is rank 0's choice, so every rank runs as many
        iters = timed_iters(comm, x, backend)
        :ok = Distributed.barrier(comm)
        t0 = System.monotonic_time(:nanosecond)
        last = Enum.reduce(1..iters, nil, fn _, _ -> Distributed.all_sum(x, comm) end)
        # on a GPU the calls only queue work: reading one element waits for it
        last |> Nx.slice([0], [1]) |> Nx.to_flat_list()
        {bytes, (System.monotonic_time(:nanosecond) - t0) / iters}
      end
    end

    # Rank 0 times one call and picks the count; all_sum of the count tells
    # every rank.
    defp timed_iters(comm, x, backend) do
      t0 = System.monotonic_time(:nanosecond)
      Distributed.all_sum(x, comm) |> Nx.slice([0], [1]) |> Nx.to_flat_list()
      dt = max(System.monotonic_time(:nanosecond) - t0, 1)
      mine = if comm.rank == 0, do: max(3, min(200, div(300_000_000, dt))), else: 0

      Nx.tensor([mine], type: :s64, backend: backend)
      |> Distributed.all_sum(comm)
      |> Nx.to_flat_list()
      |> hd()
    end

    @lr 0.05

    defn loss(p, x, y) do
      z = x |> Nx.dot(p.w1) |> Nx.add(p.b1) |> Nx.max(0.0) |> Nx.dot(p.w2) |> Nx.add(p.b2)
      -Nx.mean(Nx.sum((z - Nx.logsumexp(z, axes: [1], keep_axes: true)) * y, axes: [1]))
    end

    defn step(p, x, y, opts \\ []) do
      {loss, g} = value_and_grad(p, &loss(&1, x, y))
      {loss, g} = average({loss, g}, opts)

      {loss,
       %{
         w1: p.w1 - g.w1 * @lr,
         b1: p.b1 - g.b1 * @lr,
         w2: p.w2 - g.w2 * @lr,
         b2: p.b2 - g.b2 * @lr
       }}
    end

    deftransformp average(values, opts) do
      if comm = opts[:comm], do: Distributed.all_mean(values, comm), else: values
    end

    # ms per step of `batch` rows split over the ranks (comm nil: one process).
    def dp_step_time(nodes, batch, steps, opts) do
      comm = if nodes, do: Distributed.init(nodes, Keyword.merge([name: :bench_dp], opts[:init]))
      device = opts[:device]
      Nx.default_backend({Emily.Backend, device: device})
      size = if comm, do: comm.size, else: 1
      local = div(batch, size)
      key = Nx.Random.key(7)
      {x, key} = Nx.Random.uniform(key, 0.0, 16.0, shape: {local, 64}, type: :f32)
      y = Nx.equal(Nx.iota({local, 1}) |> Nx.remainder(10), Nx.iota({1, 10})) |> Nx.as_type(:f32)
      {w1, key} = Nx.Random.normal(key, 0.0, 0.17, shape: {64, 128}, type: :f32)
      {w2, _} = Nx.Random.normal(key, 0.0, 0.12, shape: {128, 10}, type: :f32)
      p = %{w1: w1, b1: Nx.broadcast(0.0, {128}), w2: w2, b2: Nx.broadcast(0.0, {10})}
      f = Nx.Defn.jit(&step/4, compiler: Emily.Compiler, device: device)
      opts = if comm, do: [comm: comm], else: []

      run = fn p ->
        {loss, p} = f.(p, x, y, opts)
        Nx.to_number(loss)
        p
      end

      p = Enum.reduce(1..3, p, fn _, p -> run.(p) end)
      if comm, do: :ok = Distributed.barrier(comm)
      t0 = System.monotonic_time(:microsecond)
      _ = Enum.reduce(1..steps, p, fn _, p -> run.(p) end)
      (System.monotonic_time(:microsecond) - t0) / steps / 1000
    end
  end

{opts, _, _} =
  OptionParser.parse(System.argv(),
    strict: [nccl: :boolean, ranks: :integer, max_mb: :integer, csv: :boolean]
  )

nccl = opts[:nccl] || false
ranks = opts[:ranks] || 2
max_bytes = (opts[:max_mb] || 64) * 1024 * 1024
sizes = Stream.iterate(4096, &(&1 * 4)) |> Enum.take_while(&(&1 <= max_bytes))

peers = EmilyTest.DistributedPeers.start_peers(ranks)
nodes = Enum.map(peers, &elem(&1, 1))
EmilyTest.DistributedPeers.load_module({:module, DistributedBenchRanks, bench_binary, nil}, nodes)

# Each rank's options: NCCL puts rank r on gpu:r.
rank_opts = fn node ->
  r = Enum.find_index(Enum.sort(nodes), &(&1 == node))

  if nccl,
    do: [
      init: [transport: :nccl, device: {:gpu, r}],
      backend: {Emily.Backend, device: {:gpu, r}},
      device: {:gpu, r}
    ],
    else: [init: [], backend: Emily.Backend, device: :cpu]
end

on_all = fn fun -> EmilyTest.DistributedPeers.on_all(nodes, fun, 600_000) end

results =
  on_all.(fn node ->
    :erpc.call(
      node,
      DistributedBenchRanks,
      :all_sum_sweep,
      [nodes, Keyword.put(rank_opts.(node), :sizes, sizes)],
      600_000
    )
  end)

transport = if nccl, do: "NCCL (rank r on gpu:r)", else: "TCP ring over 127.0.0.1 (CPU tensors)"
unless opts[:csv], do: IO.puts("\nall_sum, #{ranks} ranks, #{transport}, f32\n")

unless opts[:csv],
  do:
    IO.puts(
      String.pad_leading("bytes", 12) <>
        String.pad_leading("time (us)", 14) <>
        String.pad_leading("algbw GB/s", 13) <> String.pad_leading("busbw GB/s", 13)
    )

for i <- 0..(length(sizes) - 1) do
  {bytes, _} = Enum.at(hd(results), i)
  ns = results |> Enum.map(&elem(Enum.at(&1, i), 1)) |> Enum.max()
  algbw = bytes / ns
  busbw = algbw * 2 * (ranks - 1) / ranks

  if opts[:csv] do
    IO.puts("emily,#{bytes},#{Float.round(ns / 1000, 3)},#{Float.round(busbw, 4)}")
  else
    IO.puts(
      String.pad_leading("#{bytes}", 12) <>
        String.pad_leading(:erlang.float_to_binary(ns / 1000, decimals: 1), 14) <>
        String.pad_leading(:erlang.float_to_binary(algbw, decimals: 3), 13) <>
        String.pad_leading(:erlang.float_to_binary(busbw, decimals: 3), 13)
    )
  end
end

unless opts[:csv] do
  batch = 512
  steps = 30
  [first | _] = nodes

  single =
    :erpc.call(
      first,
      DistributedBenchRanks,
      :dp_step_time,
      [nil, batch, steps, rank_opts.(first)],
      600_000
    )

  multi =
    on_all.(fn node ->
      :erpc.call(
        node,
        DistributedBenchRanks,
        :dp_step_time,
        [nodes, batch, steps, rank_opts.(node)],
        600_000
      )
    end)
    |> Enum.max()

  IO.puts(
    "\ndata-parallel step, MLP 64-128-10, global batch #{batch}, Emily.Compiler (#{if nccl, do: "GPUs", else: "CPU"})\n"
  )

  IO.puts(
    "  1 process (whole batch):            #{:erlang.float_to_binary(single, decimals: 3)} ms/step"
  )

  IO.puts(
    "  #{ranks} processes (#{div(batch, ranks)} rows each + all_mean): #{:erlang.float_to_binary(multi, decimals: 3)} ms/step"
  )

  IO.puts("  machine: #{System.schedulers_online()} schedulers online (ranks share the cores)")
end

EmilyTest.DistributedPeers.stop_peers(peers)
