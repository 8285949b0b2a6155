# Throughput of Bumblebee's text embedding serving on Emily (Emily.Compiler,
# CPU) distributed by Nx.Serving over 1, 2 and 3 BEAM nodes of this machine:
# the first node is this one (it runs a serving instance and every client),
# the others are peers on 127.0.0.1 (test/support/serving_cluster.exs).
# Clients send requests with {:distributed, name} for a fixed time; the
# table gives requests/s, texts/s, the speed-up over 1 node and the request
# latency. The model is a random BERT (seeded, test/support/serving_models.exs)
# made larger than the test's so that a batch costs some milliseconds.
#
# Nodes on one machine share its cores: each node's engine thread pool
# uses all of them (EMILY_NUM_THREADS sets the pool size of every node, the
# peers inherit it), so on a 2-core machine the scaling saturates early;
# the figure that transfers to several machines is the per-node overhead.
#
#   mix run bench/serving_nodes_bench.exs [--seconds 5] [--clients 16]
#     [--texts 1] [--nodes 3] [--hidden 256] [--blocks 4] [--seq 64] [--batch 8]

Code.require_file("../test/support/serving_cluster.exs", __DIR__)

alias Emily.{ServingCluster, ServingModels}

{flags, _, _} =
  OptionParser.parse(System.argv(),
    strict: [
      seconds: :float,
      clients: :integer,
      texts: :integer,
      nodes: :integer,
      hidden: :integer,
      blocks: :integer,
      seq: :integer,
      batch: :integer
    ]
  )

seconds = flags[:seconds] || 5.0
clients = flags[:clients] || 16
texts_per_request = flags[:texts] || 1
max_nodes = min(flags[:nodes] || 3, 3)
hidden = flags[:hidden] || 256
sequence_length = flags[:seq] || 64

model = [
  hidden_size: hidden,
  num_blocks: flags[:blocks] || 4,
  num_attention_heads: max(1, div(hidden, 64)),
  sequence_length: sequence_length,
  batch_size: flags[:batch] || 8
]

# Texts of about sequence_length - 8 words, different per request.
words = ServingModels.texts() |> Enum.flat_map(&String.split/1)

texts =
  for i <- 0..63 do
    words |> Stream.cycle() |> Stream.drop(i) |> Enum.take(sequence_length - 8) |> Enum.join(" ")
  end

name = ServingModels.names().embedding
ServingCluster.ensure_distributed!("emily_bench")

IO.puts("# date: #{DateTime.utc_now() |> DateTime.truncate(:second)}")

IO.puts(
  "# cpu cores: #{System.schedulers_online()} online schedulers, " <>
    "#{:erlang.system_info(:logical_processors_available)} logical processors available; " <>
    "EMILY_NUM_THREADS=#{System.get_env("EMILY_NUM_THREADS") || "unset (all cores)"}"
)

IO.puts(
  "# model: BERT hidden #{hidden}, #{model[:num_blocks]} blocks, sequence #{sequence_length}, " <>
    "serving batch #{model[:batch_size]}; #{clients} clients, #{texts_per_request} text(s) " <>
    "per request, #{seconds} s per row"
)

IO.puts("# a 2-core machine shares its cores between the nodes: expect the scaling to saturate")

# Clients loop until the deadline; each returns its latencies (µs).
measure = fn ->
  deadline = System.monotonic_time(:microsecond) + round(seconds * 1_000_000)

  tasks =
    for c <- 1..clients do
      Task.async(fn ->
        Stream.iterate(c, &(&1 + clients))
        |> Enum.reduce_while([], fn i, lat ->
          if System.monotonic_time(:microsecond) >= deadline do
            {:halt, lat}
          else
            input =
              for k <- 0..(texts_per_request - 1),
                  do: Enum.at(texts, rem(i * texts_per_request + k, length(texts)))

            t0 = System.monotonic_time(:microsecond)
            [_ | _] = Nx.Serving.batched_run({:distributed, name}, input)
            {:cont, [System.monotonic_time(:microsecond) - t0 | lat]}
          end
        end)
      end)
    end

  start = System.monotonic_time(:microsecond)
  latencies = tasks |> Task.await_many(round(seconds * 1000) + 120_000) |> List.flatten()
  elapsed = (System.monotonic_time(:microsecond) - start) / 1.0e6
  {latencies, elapsed}
end

warm_up = fn nodes ->
  # Every node's serving has run a batch before the timed run.
  for node <- nodes do
    [_] = ServingCluster.call(node, Nx.Serving, :batched_run, [{:local, name}, [hd(texts)]])
  end
end

peers = for _ <- 2..max_nodes//1, do: ServingCluster.start_peer!("emily_bench_peer")

try do
  ServingModels.start_servings([:embedding], model: model)

  IO.puts(
    "\n" <>
      Enum.map_join(
        [{"nodes", 6}, {"requests/s", 12}, {"texts/s", 10}, {"speed-up", 10}] ++
          [{"p50 ms", 10}, {"p90 ms", 10}, {"requests", 10}],
        "",
        fn {h, w} -> String.pad_leading(h, w) end
      )
  )

  Enum.reduce(1..max_nodes, {[node()], nil}, fn n, {nodes, base} ->
    nodes =
      if n == 1 do
        nodes
      else
        {_pid, peer} = Enum.at(peers, n - 2)
        ServingCluster.start_servings!(peer, [:embedding], model: model)
        nodes ++ [peer]
      end

    ServingCluster.await_members!(name, nodes)
    warm_up.(nodes)
    {latencies, elapsed} = measure.()
    count = length(latencies)
    rate = count / elapsed
    base = base || rate
    sorted = Enum.sort(latencies)
    pct = fn q -> Enum.at(sorted, min(count - 1, trunc(q * count))) / 1000 end
    fmt = fn x, d, w -> String.pad_leading(:erlang.float_to_binary(x / 1, decimals: d), w) end

    IO.puts(
      String.pad_leading("#{n}", 6) <>
        fmt.(rate, 1, 12) <>
        fmt.(rate * texts_per_request, 1, 10) <>
        fmt.(rate / base, 2, 10) <>
        fmt.(pct.(0.5), 1, 10) <>
        fmt.(pct.(0.9), 1, 10) <> String.pad_leading("#{count}", 10)
    )

    {nodes, base}
  end)
after
  Enum.each(peers, fn {pid, _} -> ServingCluster.stop_peer(pid) end)
end
