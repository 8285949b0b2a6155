defmodule Emily.Distributed.Comm do
  @moduledoc """
  A communicator of `Emily.Distributed`: this process's `rank` among
  `size` ranks (the sorted `nodes`). `ref` is the engine's handle.
  """
  @enforce_keys [:ref, :rank, :size]
  defstruct [:ref, :rank, :size, nodes: []]

  @type t :: %__MODULE__{
          ref: reference(),
          rank: non_neg_integer(),
          size: pos_integer(),
          nodes: [node()]
        }

  defimpl Inspect do
    def inspect(%{rank: rank, size: size}, _opts),
      do: "#Emily.Distributed.Comm<rank #{rank} of #{size}>"
  end
end

defmodule Emily.Distributed.Block do
  @moduledoc false
  # The Nx.block/4 structs of Emily.Distributed. Under Emily.Backend and
  # Emily.Compiler each runs its engine collective (Emily.Block); the
  # composed fallback, which Nx also differentiates, is the identity for a
  # communicator of one rank and otherwise an error at run time (a
  # runtime_call that raises), wrapped in the collective's gradient rule.

  alias Emily.Backend.Util

  @doc false
  def native(%{__struct__: module} = struct, ref), do: module.native(struct, ref)

  @doc false
  def emily_block(struct, out, [x]) do
    Util.wrap(out, native(struct, Util.ref(x)), [x])
  end

  @doc false
  def fallback(%{comm: %{size: 1}}, x), do: x

  def fallback(%{__struct__: module} = struct, x) do
    message =
      "Emily.Distributed.#{module.op()} with #{struct.comm.size} ranks runs under " <>
        "Emily.Backend or Emily.Compiler only (got #{inspect(x.data.__struct__)})"

    case x.data do
      %Nx.Defn.Expr{} ->
        out = module.template(struct, x)
        body = Nx.runtime_call(out, x, fn _, _ -> raise ArgumentError, message end)
        Nx.Defn.Kernel.custom_grad(body, [x], fn g -> [module.grad(struct, g)] end)

      _ ->
        raise ArgumentError, message
    end
  end
end

defmodule Emily.Distributed.Block.AllSum do
  @moduledoc false
  @behaviour Emily.Block
  defstruct [:comm]

  def op, do: "all_sum"
  def native(%{comm: comm}, ref), do: Emily.Native.all_sum(ref, comm.ref)
  def template(_s, x), do: Nx.template(x.shape, x.type)
  def grad(%{comm: comm}, g), do: Emily.Distributed.all_sum(g, comm)
  @impl true
  def emily_block(s, out, args), do: Emily.Distributed.Block.emily_block(s, out, args)
end

defmodule Emily.Distributed.Block.AllGather do
  @moduledoc false
  @behaviour Emily.Block
  defstruct [:comm, :axis]

  def op, do: "all_gather"
  def native(%{comm: comm, axis: axis}, ref), do: Emily.Native.all_gather(ref, comm.ref, axis)

  def template(%{comm: comm, axis: axis}, x),
    do: Nx.template(put_elem(x.shape, axis, elem(x.shape, axis) * comm.size), x.type)

  def grad(%{comm: comm, axis: axis}, g),
    do: Emily.Distributed.reduce_scatter(g, comm, axis: axis)

  @impl true
  def emily_block(s, out, args), do: Emily.Distributed.Block.emily_block(s, out, args)
end

defmodule Emily.Distributed.Block.ReduceScatter do
  @moduledoc false
  @behaviour Emily.Block
  defstruct [:comm, :axis]

  def op, do: "reduce_scatter"

  def native(%{comm: comm, axis: axis}, ref),
    do: Emily.Native.reduce_scatter(ref, comm.ref, axis)

  def template(%{comm: comm, axis: axis}, x),
    do: Nx.template(put_elem(x.shape, axis, div(elem(x.shape, axis), comm.size)), x.type)

  def grad(%{comm: comm, axis: axis}, g), do: Emily.Distributed.all_gather(g, comm, axis: axis)
  @impl true
  def emily_block(s, out, args), do: Emily.Distributed.Block.emily_block(s, out, args)
end

defmodule Emily.Distributed.Block.Send do
  @moduledoc false
  @behaviour Emily.Block
  defstruct [:comm, :dest]

  def op, do: "send"
  def native(%{comm: comm, dest: dest}, ref), do: Emily.Native.comm_send(ref, comm.ref, dest)
  def template(_s, x), do: Nx.template(x.shape, x.type)

  def grad(_s, _g),
    do: raise(ArgumentError, "Emily.Distributed.send is not differentiable")

  @impl true
  def emily_block(s, out, args), do: Emily.Distributed.Block.emily_block(s, out, args)
end
