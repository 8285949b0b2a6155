defmodule Emily.Distributed do
  @moduledoc """
  Collectives across processes on engine arrays: `all_sum/2`,
  `all_mean/2`, `all_gather/3`, `reduce_scatter/3`, `send/3`, `recv/4`
  and `barrier/1`, eagerly on `Emily.Backend` tensors and inside `defn`
  under `Emily.Compiler` (a compiled training step contains its gradient
  all-reduce).

  ## Communicators

  Every process that takes part calls `init/2` with the same list of
  nodes (its own node among them) at about the same time, and gets its
  `Emily.Distributed.Comm`: the rank is the node's index in the sorted
  list. The bootstrap is Erlang distribution: each rank opens a TCP
  listener (port chosen by the kernel), the addresses meet at rank 0's
  process (found through `:global`) and go back to everyone, then the
  engine connects a mesh of plain TCP sockets between the ranks. Data
  never goes through Erlang distribution.

      # on each of the nodes (connected with Node.connect/1)
      comm = Emily.Distributed.init([:"a@127.0.0.1", :"b@127.0.0.1"])
      grads = Emily.Distributed.all_mean(grads, comm)

  The communicator stays open while it is referenced (by the struct, or
  by a compiled program or a lazy tensor that uses it); `close/1` closes
  its sockets at once (peers then fail with "peer rank N closed the
  connection").

  ## Semantics

  As with MPI and NCCL, every rank runs the same collectives in the same
  order. A rank whose shape or type differs makes the collective raise
  `ArgumentError` on every rank, naming both shapes. A peer that dies or
  stays silent for `:timeout` milliseconds makes it raise `RuntimeError`,
  and the communicator is then unusable (make a new one).

  Results are bit-identical on every rank (the ring all-reduce sums each
  chunk once, in a fixed order, and copies it to everyone).

  Eager calls (outside `defn`) are evaluated at once, so that every rank
  runs them in program order. Inside `defn` they are nodes of the program,
  run in the program's order, which is the same on every rank when every
  rank compiles the same function; evaluate all the outputs of such a
  step together (reading them one by one in different orders on
  different ranks is the one way to run its collectives out of order).

  Pass the communicator to a `defn` in its options (`step(x, comm: comm)`)
  or close over it in `Nx.Defn.jit/2`: it is then part of the compiler's
  cache key, and the compiled program holds it.

  Under another backend or compiler the collectives are the identity when
  the communicator has one rank, and raise otherwise.

  ## Gradients

  `all_sum` and `all_mean` differentiate to themselves, `all_gather` to
  `reduce_scatter` and back. `send`, `recv` and `barrier` are not
  differentiable.

  ## GPU tensors

  `init(nodes, transport: :nccl, device: {:gpu, i})` makes an NCCL
  communicator (rank 0 creates the clique id and sends it through Erlang
  distribution): collectives are queued on the GPU's stream like any
  kernel. NCCL exchanges no headers, so ranks that disagree on shapes get
  NCCL's behaviour (a hang or wrong data) rather than an `ArgumentError`.
  A TCP communicator also takes GPU tensors, copied through host memory.
  """

  import Nx.Defn, only: [deftransform: 2]

  alias Emily.Backend.Util
  alias Emily.Distributed.Block
  alias Emily.Distributed.Comm
  alias Emily.Native

  @default_timeout 60_000

  @doc """
  Joins the ranks of `nodes` and returns this node's communicator.

  Every node of `nodes` must call it (with the same list and `:name`).

  ## Options

    * `:host` - the IPv4 address this rank listens on and peers connect
      to. Defaults to `"127.0.0.1"` (one machine); use the address of the
      interface the other machines reach.
    * `:timeout` - milliseconds to wait for the peers, and for any
      transfer to make progress. Defaults to `#{@default_timeout}`.
    * `:name` - tells concurrent bootstraps apart (any term). Defaults to
      `:default`.
    * `:transport` - `:tcp` (default: plain TCP sockets, CPU and GPU
      tensors, GPU ones through host memory) or `:nccl` (GPU tensors on
      `:device` only, through NCCL on the device's stream; one
      communicator per process and GPU; libnccl.so.2 must be installed,
      e.g. `pip install nvidia-nccl-cu13`, or named by `EMILY_NCCL_LIB`).
    * `:device` - the GPU of an NCCL communicator. Defaults to
      `{:gpu, 0}`.
  """
  @spec init([node()], keyword()) :: Comm.t()
  def init(nodes, opts \\ []) when is_list(nodes) do
    opts =
      Keyword.validate!(opts,
        host: "127.0.0.1",
        timeout: @default_timeout,
        name: :default,
        transport: :tcp,
        device: {:gpu, 0}
      )

    nodes = nodes |> Enum.uniq() |> Enum.sort()
    size = length(nodes)

    rank =
      Enum.find_index(nodes, &(&1 == node())) ||
        raise ArgumentError, "init: this node #{inspect(node())} is not in #{inspect(nodes)}"

    for other <- nodes, other != node(), do: Node.connect(other)
    ref = connect(opts[:transport], nodes, rank, opts)
    %Comm{ref: ref, rank: rank, size: size, nodes: nodes}
  end

  defp connect(:tcp, nodes, rank, opts) do
    host = to_string(opts[:host])
    {ref, port} = Native.comm_listen(host)
    addresses = exchange(nodes, rank, {host, port}, opts[:name], opts[:timeout])
    :ok = Native.comm_connect(ref, rank, length(nodes), addresses, opts[:timeout])
    ref
  end

  # Rank 0 makes the clique's id; it reaches the others as rank 0's
  # "address".
  defp connect(:nccl, nodes, rank, opts) do
    device = Emily.Device.to_index!(opts[:device], "Emily.Distributed.init")

    if device == 0 do
      raise ArgumentError, "init: the NCCL transport needs a GPU device, got: :cpu"
    end

    id = if rank == 0, do: Native.comm_nccl_id(device)
    [id | _] = exchange(nodes, rank, id, opts[:name], opts[:timeout])
    Native.comm_nccl_new(device, rank, length(nodes), id)
  end

  defp connect(other, _nodes, _rank, _opts),
    do: raise(ArgumentError, "init: :transport must be :tcp or :nccl, got: #{inspect(other)}")

  # Rank 0's process collects every rank's address and sends the list
  # back; the others find it through :global.
  defp exchange(nodes, 0, address, name, timeout) do
    key = {__MODULE__, name}
    size = length(nodes)

    case :global.register_name(key, self()) do
      :yes -> :ok
      :no -> raise ArgumentError, "init: a bootstrap named #{inspect(name)} is already running"
    end

    try do
      deadline = System.monotonic_time(:millisecond) + timeout
      peers = collect(nodes, size - 1, %{}, deadline)
      addresses = [address | Enum.map(1..(size - 1)//1, &elem(Map.fetch!(peers, &1), 0))]

      for {_address, pid} <- Map.values(peers),
          do: Kernel.send(pid, {__MODULE__, :addresses, addresses})

      addresses
    after
      :global.unregister_name(key)
    end
  end

  defp exchange(nodes, rank, address, name, timeout) do
    deadline = System.monotonic_time(:millisecond) + timeout
    boot = find_boot({__MODULE__, name}, deadline)
    Kernel.send(boot, {__MODULE__, :hello, rank, nodes, address, self()})

    receive do
      {__MODULE__, :addresses, addresses} -> addresses
      {__MODULE__, :refused, reason} -> raise ArgumentError, "init: #{reason}"
    after
      max(deadline - System.monotonic_time(:millisecond), 0) ->
        raise RuntimeError, "init: rank 0 (#{hd(nodes)}) did not answer within #{timeout} ms"
    end
  end

  defp find_boot(key, deadline) do
    case :global.whereis_name(key) do
      pid when is_pid(pid) ->
        pid

      :undefined ->
        if System.monotonic_time(:millisecond) > deadline,
          do: raise(RuntimeError, "init: rank 0 did not start its bootstrap in time")

        Process.sleep(20)
        find_boot(key, deadline)
    end
  end

  defp collect(_nodes, 0, peers, _deadline), do: peers

  defp collect(nodes, missing, peers, deadline) do
    receive do
      {__MODULE__, :hello, rank, ^nodes, address, pid} when not is_map_key(peers, rank) ->
        collect(nodes, missing - 1, Map.put(peers, rank, {address, pid}), deadline)

      {__MODULE__, :hello, _rank, other, _address, pid} ->
        reason = "ranks disagree on the nodes: #{inspect(nodes)} vs #{inspect(other)}"
        Kernel.send(pid, {__MODULE__, :refused, reason})
        for {_a, p} <- Map.values(peers), do: Kernel.send(p, {__MODULE__, :refused, reason})
        raise ArgumentError, "init: " <> reason
    after
      max(deadline - System.monotonic_time(:millisecond), 0) ->
        raise RuntimeError,
              "init: #{missing} of the ranks #{inspect(nodes)} did not join in time"
    end
  end

  @doc """
  A communicator of this process alone (rank 0 of 1): every collective is
  the identity. For tests and for code that runs distributed or not.
  """
  @spec single() :: Comm.t()
  def single do
    {ref, port} = Native.comm_listen("127.0.0.1")
    :ok = Native.comm_connect(ref, 0, 1, [{"127.0.0.1", port}], @default_timeout)
    %Comm{ref: ref, rank: 0, size: 1, nodes: [node()]}
  end

  @doc "Closes the communicator's sockets now (see the module doc)."
  @spec close(Comm.t()) :: :ok
  def close(%Comm{ref: ref}), do: Native.comm_close(ref)

  @doc "This process's rank."
  def rank(%Comm{rank: rank}), do: rank

  @doc "The number of ranks."
  def size(%Comm{size: size}), do: size

  @doc """
  This rank's part of `tensor` split along `axis` into `size` equal,
  contiguous parts (part `rank`): the weight shard of a tensor-parallel
  layer, cut from the full weight that every rank holds or loads.

  A column-parallel projection `x · w` (`w` of shape `{in, out}`) takes
  `shard(w, comm, 1)` and gives this rank's slice of the output features;
  a row-parallel one takes `shard(w, comm, 0)` and the matching slice of
  the input features, and its partial products are summed with
  `all_sum/2`. `comm` may be `nil` (one process): the tensor itself.
  On `Emily.Backend` the part is row-major (a copy when the slice is not
  contiguous in the full tensor), so that the matrix products read it in
  place.

      iex> comm = %{Emily.Distributed.single() | rank: 1, size: 2}
      iex> Emily.Distributed.shard(Nx.iota({2, 4}), comm, 1) |> Nx.to_list()
      [[2, 3], [6, 7]]
  """
  @spec shard(Nx.Tensor.t(), Comm.t() | nil, integer()) :: Nx.Tensor.t()
  def shard(tensor, comm, axis \\ 0)

  def shard(tensor, nil, _axis), do: Nx.to_tensor(tensor)

  def shard(tensor, %Comm{rank: rank, size: size}, axis) do
    tensor = Nx.to_tensor(tensor)
    axis = axis!(tensor, axis, "shard")
    dim = elem(tensor.shape, axis)

    if rem(dim, size) != 0 do
      raise ArgumentError,
            "shard: axis #{axis} of #{inspect(tensor.shape)} must be divisible by the " <>
              "number of ranks #{size}"
    end

    part = div(dim, size)
    tensor |> Nx.slice_along_axis(rank * part, part, axis: axis) |> contiguous()
  end

  # A slice is a strided view of the full tensor: a row-major copy of its
  # own lets the kernels (matrix products above all) read it in place.
  defp contiguous(%Nx.Tensor{data: %Emily.Backend{ref: ref} = data} = t),
    do: %{t | data: %{data | ref: Native.contiguous(ref)}}

  defp contiguous(tensor), do: tensor

  # ---- collectives -----------------------------------------------------------

  @doc """
  The element-wise sum of `tensor` over every rank (same shape and type
  on every rank), bit-identical on every rank. A container (a map or
  tuple of tensors, e.g. gradients) is summed as one flat concatenation
  inside `defn` when its leaves share a type (one collective instead of
  one per leaf), else leaf by leaf in its traversal order.
  """
  deftransform all_sum(tensor_or_container, comm) do
    comm = comm!(comm, "all_sum")
    leaves = Nx.Defn.Composite.flatten_list([tensor_or_container])

    if bucket?(leaves) do
      # One collective for the whole container (inside defn, leaves of one
      # type): a ring pass costs latency per call, and a model's gradients
      # are many tensors. Summing the concatenation is summing each leaf.
      flat = leaves |> Enum.map(&Nx.flatten/1) |> Nx.concatenate()
      summed = run(%Block.AllSum{comm: comm}, flat, & &1)

      {result, _offset} =
        Nx.Defn.Composite.traverse(tensor_or_container, 0, fn leaf, offset ->
          size = Nx.size(leaf)

          piece =
            summed |> Nx.slice([offset], [size]) |> Nx.reshape(leaf.shape, names: leaf.names)

          {piece, offset + size}
        end)

      result
    else
      Nx.Defn.Composite.traverse(tensor_or_container, fn tensor ->
        run(%Block.AllSum{comm: comm}, tensor, & &1)
      end)
    end
  end

  defp bucket?([_, _ | _] = leaves) do
    Enum.all?(leaves, &match?(%Nx.Tensor{data: %Nx.Defn.Expr{}}, &1)) and
      leaves |> Enum.map(& &1.type) |> Enum.uniq() |> length() == 1
  end

  defp bucket?(_leaves), do: false

  @doc """
  `all_sum/2` divided by the number of ranks (for floats: the mean of a
  data-parallel gradient).
  """
  deftransform all_mean(tensor_or_container, comm) do
    comm = comm!(comm, "all_mean")

    tensor_or_container
    |> all_sum(comm)
    |> Nx.Defn.Composite.traverse(&Nx.divide(&1, comm.size))
  end

  @doc """
  Every rank's `tensor` concatenated along `:axis` (default 0) in rank
  order; the same shape on every rank.
  """
  deftransform all_gather(tensor, comm, opts \\ []) do
    comm = comm!(comm, "all_gather")
    opts = Keyword.validate!(opts, axis: 0)
    tensor = Nx.to_tensor(tensor)
    axis = axis!(tensor, opts[:axis], "all_gather")
    out_shape = put_elem(tensor.shape, axis, elem(tensor.shape, axis) * comm.size)
    run(%Block.AllGather{comm: comm, axis: axis}, tensor, &%{&1 | shape: out_shape})
  end

  @doc """
  Part `rank` of the sum over every rank of `tensor`, split along `:axis`
  (default 0) into `size` equal parts (the axis must be divisible by the
  number of ranks).
  """
  deftransform reduce_scatter(tensor, comm, opts \\ []) do
    comm = comm!(comm, "reduce_scatter")
    opts = Keyword.validate!(opts, axis: 0)
    tensor = Nx.to_tensor(tensor)
    axis = axis!(tensor, opts[:axis], "reduce_scatter")
    dim = elem(tensor.shape, axis)

    if rem(dim, comm.size) != 0 do
      raise ArgumentError,
            "reduce_scatter: axis #{axis} of #{inspect(tensor.shape)} must be divisible by " <>
              "the number of ranks #{comm.size}"
    end

    out_shape = put_elem(tensor.shape, axis, div(dim, comm.size))
    run(%Block.ReduceScatter{comm: comm, axis: axis}, tensor, &%{&1 | shape: out_shape})
  end

  @doc """
  Sends `tensor` to rank `dest` and returns it. Eagerly the send has
  happened when this returns (it waits for the receiver to take the
  header); inside `defn` use the result, or the send is dropped with it.
  """
  deftransform send(tensor, comm, dest) do
    comm = comm!(comm, "send")
    peer!(comm, dest, "send")
    run(%Block.Send{comm: comm, dest: dest}, tensor, & &1)
  end

  @doc """
  Receives a tensor of `shape` and `type` from rank `source` (a sender
  with another shape or type makes both sides raise).
  """
  def recv(comm, source, shape, type) do
    comm = comm!(comm, "recv")
    peer!(comm, source, "recv")
    type = Nx.Type.normalize!(type)

    ref =
      Native.comm_recv(comm.ref, source, Util.engine_type!(type, "recv"), Tuple.to_list(shape))

    eager(Nx.template(shape, type), ref, [])
  end

  @doc "Returns once every rank has called `barrier/1`."
  @spec barrier(Comm.t()) :: :ok
  def barrier(comm) do
    comm = comm!(comm, "barrier")
    :ok = Emily.eval(Native.barrier(comm.ref))
  end

  # ---- dispatch ----------------------------------------------------------------

  # Inside defn: an Nx.block whose engine side (Emily.Block) is the native
  # collective; eagerly: the native collective on Emily.Backend, evaluated.
  defp run(struct, tensor, out_fun) do
    tensor = Nx.to_tensor(tensor)
    out = out_fun.(Nx.template(tensor.shape, tensor.type))

    case tensor.data do
      %Nx.Defn.Expr{} ->
        Nx.block(struct, [tensor], out, &Block.fallback/2)

      _ ->
        ref = Block.native(struct, Util.ref(tensor))
        eager(out, ref, [tensor])
    end
  end

  defp eager(out, ref, inputs) do
    result = Util.wrap(%{out | names: List.duplicate(nil, tuple_size(out.shape))}, ref, inputs)
    :ok = Emily.eval(result.data.ref)
    result
  end

  defp comm!(%Comm{} = comm, _op), do: comm

  defp comm!(other, op),
    do: raise(ArgumentError, "#{op}: expected an Emily.Distributed.Comm, got: #{inspect(other)}")

  defp peer!(%Comm{rank: rank, size: size}, peer, op) do
    unless is_integer(peer) and peer >= 0 and peer < size and peer != rank do
      raise ArgumentError,
            "#{op}: rank #{inspect(peer)} is out of range or this rank (#{rank}) in a " <>
              "communicator of #{size}"
    end
  end

  defp axis!(%Nx.Tensor{shape: shape}, axis, op) do
    rank = tuple_size(shape)

    cond do
      rank == 0 ->
        raise ArgumentError, "#{op}: a scalar has no axis to split or join"

      is_integer(axis) and axis >= 0 and axis < rank ->
        axis

      is_integer(axis) and axis < 0 and axis >= -rank ->
        axis + rank

      true ->
        raise ArgumentError, "#{op}: axis #{inspect(axis)} is out of range for #{inspect(shape)}"
    end
  end
end
