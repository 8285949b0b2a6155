Code.require_file("../support/distributed_peers.exs", __DIR__)

# What each rank runs (its object code is shipped to the peer nodes).
{:module, _, ranks_binary, _} =
  defmodule EmilyTest.DistributedRanks do
    @moduledoc false
    import Nx.Defn

    alias Emily.Distributed

    defp t(list, type \\ :f32), do: Nx.tensor(list, type: type, backend: Emily.Backend)

    # Every collective, eagerly.
    def collectives(nodes) do
      comm = Distributed.init(nodes)
      r = comm.rank
      n = comm.size

      sum = Distributed.all_sum(t([r + 1, 10 * (r + 1), 0.5]), comm)
      isum = Distributed.all_sum(t([2_147_483_647, r], :s32), comm)
      mean = Distributed.all_mean(t([[r * 2.0, 4.0]]), comm)
      gathered0 = Distributed.all_gather(t([[r, r + 0.5]]), comm)
      gathered1 = Distributed.all_gather(t([[r], [r + 10]]), comm, axis: 1)

      scattered =
        Distributed.reduce_scatter(Nx.iota({2 * n, 2}, type: :f32, backend: Emily.Backend), comm)

      # a ring of sends, even ranks sending first
      right = rem(r + 1, n)
      left = rem(r + n - 1, n)
      payload = t([r, r * r], :s64)

      received =
        if rem(r, 2) == 0 do
          Distributed.send(payload, comm, right)
          Distributed.recv(comm, left, {2}, :s64)
        else
          got = Distributed.recv(comm, left, {2}, :s64)
          Distributed.send(payload, comm, right)
          got
        end

      :ok = Distributed.barrier(comm)

      %{
        rank: r,
        sum: Nx.to_binary(sum),
        isum: Nx.to_list(isum),
        mean: Nx.to_list(mean),
        gathered0: Nx.to_list(gathered0),
        gathered1: Nx.to_list(gathered1),
        scattered: Nx.to_list(scattered),
        received: Nx.to_list(received)
      }
    end

    defn step(x, opts \\ []) do
      Distributed.all_sum(x * 2, opts[:comm]) + 1
    end

    defn gather_step(x, opts \\ []) do
      Distributed.all_gather(x, opts[:comm], axis: 1) |> Nx.sum(axes: [0])
    end

    defn weighted(x, w, comm) do
      Nx.sum(Distributed.all_sum(x, comm) * w)
    end

    defn gathered_weighted(x, w, comm) do
      Nx.sum(Distributed.all_gather(x, comm) * w)
    end

    # Collectives inside defn under Emily.Compiler; two communicators give two
    # programs; the gradient of an all_sum is an all_sum.
    def in_defn(nodes) do
      comm = Distributed.init(nodes)
      comm2 = Distributed.init(nodes, name: :second)
      r = comm.rank
      opts = [compiler: Emily.Compiler]
      Emily.Compiler.clear_cache()
      a = Nx.Defn.jit(&step/2, opts).(t([r, 1.0, 2.0]), comm: comm)
      after_a = Emily.Compiler.cache_info()
      b = Nx.Defn.jit(&step/2, opts).(t([r * 2, 1.0, 2.0]), comm: comm)
      after_b = Emily.Compiler.cache_info()
      c = Nx.Defn.jit(&step/2, opts).(t([r * 3, 1.0, 2.0]), comm: comm2)
      after_c = Emily.Compiler.cache_info()
      g = Nx.Defn.jit(&gather_step/2, opts).(t([[r, 1.0]]), comm: comm)

      grad =
        Nx.Defn.jit(
          fn x, w -> Nx.Defn.grad(x, &weighted(&1, w, comm)) end,
          opts
        ).(t([1.0, 2.0]), t([r + 1.0, 10.0]))

      # d/dx sum(all_gather(x) * w) = reduce_scatter(w)
      gather_grad =
        Nx.Defn.jit(fn x, w -> Nx.Defn.grad(x, &gathered_weighted(&1, w, comm)) end, opts).(
          t([1.0, 2.0]),
          t([1.0 + r, 2.0 + r, 3.0 + r, 4.0 + r])
        )

      %{
        rank: r,
        gather_grad: Nx.to_list(gather_grad),
        a: Nx.to_list(a),
        b: Nx.to_list(b),
        c: Nx.to_list(c),
        g: Nx.to_list(g),
        grad: Nx.to_list(grad),
        # the same communicator: a hit; another one: a new program
        b_hit: after_b.hits == after_a.hits + 1 and after_b.misses == after_a.misses,
        c_miss: after_c.misses == after_b.misses + 1
      }
    end

    defp error_of(fun) do
      fun.()
      :no_error
    rescue
      e -> {e.__struct__, Exception.message(e)}
    end

    # Rank 1 passes another shape; then rank 1 closes its communicator.
    def failures(nodes) do
      comm = Distributed.init(nodes, timeout: 5_000)
      r = comm.rank
      shape_error = error_of(fn -> Distributed.all_sum(t(List.duplicate(1.0, 3 + r)), comm) end)
      still_ok = Nx.to_list(Distributed.all_sum(t([1.0]), comm))

      closed_error =
        if r == 1 do
          Distributed.close(comm)
          error_of(fn -> Distributed.all_sum(t([1.0]), comm) end)
        else
          error_of(fn -> Distributed.all_sum(t(List.duplicate(1.0, 100_000)), comm) end)
        end

      %{rank: r, shape_error: shape_error, still_ok: still_ok, closed_error: closed_error}
    end

    # ---- data-parallel training of the digits MLP (64-128-10) ---------------

    @lr 0.05
    @momentum 0.9

    defn logits(p, x) do
      x |> Nx.dot(p.w1) |> Nx.add(p.b1) |> Nx.max(0.0) |> Nx.dot(p.w2) |> Nx.add(p.b2)
    end

    defn loss(p, x, y) do
      z = logits(p, x)
      log_probs = z - Nx.logsumexp(z, axes: [1], keep_axes: true)
      -Nx.mean(Nx.sum(log_probs * y, axes: [1]))
    end

    # One SGD-with-momentum step; with a communicator, the gradients (and the
    # loss) are averaged over the ranks first: each rank's loss is the mean
    # over its half of the batch, so the mean of the ranks' gradients is the
    # gradient of the whole batch's mean loss.
    defn train_step(params, velocity, x, y, opts \\ []) do
      {loss, grads} = value_and_grad(params, &loss(&1, x, y))

      {loss, grads} = average({loss, grads}, opts)

      velocity = %{
        w1: velocity.w1 * @momentum + grads.w1,
        b1: velocity.b1 * @momentum + grads.b1,
        w2: velocity.w2 * @momentum + grads.w2,
        b2: velocity.b2 * @momentum + grads.b2
      }

      params = %{
        w1: params.w1 - velocity.w1 * @lr,
        b1: params.b1 - velocity.b1 * @lr,
        w2: params.w2 - velocity.w2 * @lr,
        b2: params.b2 - velocity.b2 * @lr
      }

      {loss, params, velocity}
    end

    deftransformp average(values, opts) do
      if comm = opts[:comm], do: Distributed.all_mean(values, comm), else: values
    end

    # Digits-shaped data (8x8 pixels in [0, 16], 10 classes from a random
    # linear teacher) and He-initialised parameters, the same on every node.
    def dp_setup(batch, steps) do
      key = Nx.Random.key(2026)
      {x, key} = Nx.Random.uniform(key, 0.0, 16.0, shape: {steps * batch, 64}, type: :f32)
      {teacher, key} = Nx.Random.normal(key, shape: {64, 10}, type: :f32)
      labels = Nx.argmax(Nx.dot(x, teacher), axis: 1)
      y = Nx.equal(Nx.new_axis(labels, 1), Nx.iota({1, 10})) |> Nx.as_type(:f32)
      {w1, key} = Nx.Random.normal(key, 0.0, :math.sqrt(2.0 / 64), shape: {64, 128}, type: :f32)
      {w2, _key} = Nx.Random.normal(key, 0.0, :math.sqrt(2.0 / 128), shape: {128, 10}, type: :f32)
      params = %{w1: w1, b1: Nx.broadcast(0.0, {128}), w2: w2, b2: Nx.broadcast(0.0, {10})}
      velocity = Map.new(params, fn {k, v} -> {k, Nx.multiply(v, 0.0)} end)
      {x, y, params, velocity}
    end

    # Trains `steps` steps of the global batch; with `comm`, this rank takes
    # its contiguous share of each batch.
    def dp_train(comm, batch, steps) do
      Nx.default_backend(Emily.Backend)
      {x, y, params, velocity} = dp_setup(batch, steps)
      step = Nx.Defn.jit(&train_step/5, compiler: Emily.Compiler)
      {rank, size} = if comm, do: {comm.rank, comm.size}, else: {0, 1}
      local = div(batch, size)
      opts = if comm, do: [comm: comm], else: []

      {params, losses} =
        Enum.reduce(0..(steps - 1), {{params, velocity}, []}, fn s, {{p, v}, losses} ->
          xb = Nx.slice_along_axis(x, s * batch + rank * local, local, axis: 0)
          yb = Nx.slice_along_axis(y, s * batch + rank * local, local, axis: 0)
          {loss, p, v} = step.(p, v, xb, yb, opts)
          {{p, v}, [Nx.to_number(loss) | losses]}
        end)
        |> then(fn {{p, _v}, losses} -> {p, Enum.reverse(losses)} end)

      %{params: Map.new(params, fn {k, t} -> {k, Nx.to_binary(t)} end), losses: losses}
    end

    def data_parallel(nodes, batch, steps) do
      comm = Distributed.init(nodes, name: :data_parallel)
      Map.put(dp_train(comm, batch, steps), :rank, comm.rank)
    end
  end

:persistent_term.put({EmilyTest.DistributedRanks, :binary}, ranks_binary)

defmodule Emily.DistributedTest do
  # Starts distribution and peer nodes.
  use ExUnit.Case, async: false

  alias Emily.Distributed
  alias EmilyTest.DistributedPeers, as: Peers

  @moduletag timeout: 120_000

  setup_all do
    peers = Peers.start_peers(3)
    nodes = Enum.map(peers, &elem(&1, 1))

    binary = :persistent_term.get({EmilyTest.DistributedRanks, :binary})
    Peers.load_module({:module, EmilyTest.DistributedRanks, binary, nil}, nodes)
    on_exit(fn -> Peers.stop_peers(peers) end)
    %{nodes: nodes}
  end

  defp run(nodes, fun),
    do: Peers.on_all(nodes, &:erpc.call(&1, EmilyTest.DistributedRanks, fun, [nodes], 60_000))

  test "every collective across 3 nodes, bit-identical sums", %{nodes: nodes} do
    results = run(nodes, :collectives)
    [first | _] = results
    # the same bytes on every rank
    assert Enum.all?(results, &(&1.sum == first.sum))
    assert first.sum == <<6.0::float-32-native, 60.0::float-32-native, 1.5::float-32-native>>

    for res <- results do
      r = res.rank
      # s32 wraps: 3 * (2^31 - 1) mod 2^32
      assert res.isum == [2_147_483_645, 3]
      assert res.mean == [[2.0, 4.0]]
      assert res.gathered0 == [[0.0, 0.5], [1.0, 1.5], [2.0, 2.5]]
      assert res.gathered1 == [[0.0, 1.0, 2.0], [10.0, 11.0, 12.0]]
      # iota({6, 2}) summed over 3 ranks, rows 2r and 2r + 1
      assert res.scattered == [[12.0 * r + 0, 12.0 * r + 3], [12.0 * r + 6, 12.0 * r + 9]]
      left = rem(r + 2, 3)
      assert res.received == [left, left * left]
    end
  end

  test "inside defn under Emily.Compiler, one program per communicator, gradients", %{
    nodes: nodes
  } do
    two = Enum.take(nodes, 2)
    results = run(two, :in_defn)

    for res <- results do
      # sum over ranks of 2x + 1
      assert res.a == [3.0, 5.0, 9.0]
      assert res.b == [5.0, 5.0, 9.0]
      assert res.c == [7.0, 5.0, 9.0]
      # [[0, 1, 1, 1]] summed over its one row
      assert res.g == [0.0, 1.0, 1.0, 1.0]
      # d/dx sum(all_sum(x) * w) = all_sum(w)
      assert res.grad == [3.0, 20.0]
      # d/dx sum(all_gather(x) * w) = reduce_scatter(w): [3, 5, 7, 9] split
      assert res.gather_grad == Enum.at([[3.0, 5.0], [7.0, 9.0]], res.rank)
      assert res.b_hit
      assert res.c_miss
    end
  end

  test "a shape mismatch raises on every rank; a closed peer is an error, not a hang", %{
    nodes: nodes
  } do
    two = Enum.take(nodes, 2)
    [r0, r1] = run(two, :failures)

    for res <- [r0, r1] do
      assert {ArgumentError, msg} = res.shape_error
      assert msg =~ "all_sum"
      assert msg =~ "f32[3]"
      assert msg =~ "rank 1 has f32[4]"
      assert res.still_ok == [2.0]
    end

    assert {RuntimeError, msg} = r0.closed_error
    assert msg =~ "distributed all_sum: peer rank 1 closed the connection"
    assert {ArgumentError, msg} = r1.closed_error
    assert msg =~ "closed"
  end

  test "data-parallel training on 2 nodes matches one process on the whole batch", %{nodes: nodes} do
    two = Enum.take(nodes, 2)
    batch = 64
    steps = 6

    [r0, r1] =
      Peers.on_all(
        two,
        &:erpc.call(&1, EmilyTest.DistributedRanks, :data_parallel, [two, batch, steps], 60_000)
      )

    single = EmilyTest.DistributedRanks.dp_train(nil, batch, steps)

    # bit-identical across the ranks: the all-reduce copies one sum everywhere
    assert r0.params == r1.params
    assert r0.losses == r1.losses

    # the same training as one process on the whole batch, up to float
    # rounding: each rank sums its 32 rows, then the two halves are added
    # (one process sums the 64 rows in one reduction), and the mean divides
    # by 2 after dividing by 32 rather than by 64 at once
    for {k, bytes} <- single.params do
      want = for <<v::float-32-native <- bytes>>, do: v
      got = for <<v::float-32-native <- r0.params[k]>>, do: v
      diff = Enum.zip_with(want, got, fn a, b -> abs(a - b) end) |> Enum.max()
      assert diff < 1.0e-5, "#{k}: max difference #{diff}"
    end

    # the losses (sums near 190) differ by a few f32 ulps: relative tolerance
    for {a, b} <- Enum.zip(single.losses, r0.losses),
        do: assert_in_delta(a, b, 1.0e-6 * max(abs(a), 1.0))

    # and it trains
    assert List.last(r0.losses) < hd(r0.losses)
  end

  describe "on one node" do
    test "a single-rank communicator: every collective is the identity" do
      comm = Distributed.single()
      x = Nx.tensor([[1.0, 2.0]], backend: Emily.Backend)
      assert Nx.to_list(Distributed.all_sum(x, comm)) == [[1.0, 2.0]]
      assert Nx.to_list(Distributed.all_gather(x, comm, axis: 1)) == [[1.0, 2.0]]
      assert Nx.to_list(Distributed.reduce_scatter(x, comm)) == [[1.0, 2.0]]
      assert :ok = Distributed.barrier(comm)

      # under another backend and compiler, the fallback is the identity too
      bin = Nx.tensor([3.0, 4.0], backend: Nx.BinaryBackend)
      f = Nx.Defn.jit(&Distributed.all_sum(&1, comm), compiler: Nx.Defn.Evaluator)
      assert Nx.to_list(f.(bin)) == [3.0, 4.0]
    end

    test "with more ranks, other compilers raise a clear error" do
      comm = %{Distributed.single() | size: 2}
      bin = Nx.tensor([3.0, 4.0], backend: Nx.BinaryBackend)
      f = Nx.Defn.jit(&Distributed.all_sum(&1, comm), compiler: Nx.Defn.Evaluator)

      assert_raise ArgumentError,
                   ~r/all_sum with 2 ranks runs under Emily.Backend or Emily.Compiler/,
                   fn ->
                     f.(bin)
                   end
    end

    test "bad arguments raise, naming the op" do
      comm = Distributed.single()
      x = Nx.tensor([[1.0, 2.0]], backend: Emily.Backend)

      assert_raise ArgumentError, ~r/send: rank 0 is out of range or this rank/, fn ->
        Distributed.send(x, comm, 0)
      end

      assert_raise ArgumentError, ~r/recv: rank 5/, fn -> Distributed.recv(comm, 5, {2}, :f32) end

      assert_raise ArgumentError, ~r/all_gather: axis 2/, fn ->
        Distributed.all_gather(x, comm, axis: 2)
      end

      assert_raise ArgumentError, ~r/all_sum: expected an Emily.Distributed.Comm/, fn ->
        Distributed.all_sum(x, :nope)
      end

      assert_raise ArgumentError, ~r/init: this node/, fn ->
        Distributed.init([:"nobody@127.0.0.1"])
      end

      Distributed.close(comm)

      assert_raise ArgumentError, ~r/all_sum: the communicator is closed/, fn ->
        Distributed.all_sum(x, comm)
      end

      assert_raise ArgumentError, ~r/comm_listen/, fn -> Emily.Native.comm_listen("localhost") end
    end
  end
end
