defmodule EmilyTest.Differential.Gen do
  @moduledoc false
  # Random inputs for the differential test. All randomness comes from the
  # process's :rand state, which the runner seeds per call from
  # {seed, call index}: a call is replayed on its own by its index.
  #
  # Tensors are built on Nx.BinaryBackend and kept small (at most 64
  # elements) so a failure message can print them whole.

  @max_elems 64

  @int_types [{:u, 8}, {:u, 16}, {:u, 32}, {:u, 64}, {:s, 8}, {:s, 16}, {:s, 32}, {:s, 64}]
  @float_types [{:f, 16}, {:bf, 16}, {:f, 32}, {:f, 64}]
  @complex_types [{:c, 64}, {:c, 128}]

  def int_types, do: @int_types
  def float_types, do: @float_types
  def complex_types, do: @complex_types
  def real_types, do: @int_types ++ @float_types
  def all_types, do: real_types() ++ @complex_types

  ## Primitive draws

  def int(lo, hi), do: lo + :rand.uniform(hi - lo + 1) - 1
  def pick(list), do: Enum.at(list, :rand.uniform(length(list)) - 1)
  def chance(p), do: :rand.uniform() < p
  def bool, do: chance(0.5)
  def uniform(lo, hi), do: lo + (hi - lo) * :rand.uniform()

  @doc "A random subset of `list`, order kept."
  def subset(list), do: Enum.filter(list, fn _ -> bool() end)

  @doc "A shape of rank `min..max` with at most #{@max_elems} elements."
  def shape(min_rank \\ 0, max_rank \\ 3, max_dim \\ 4) do
    rank = int(min_rank, max_rank)
    dims = for _ <- List.duplicate(nil, rank), do: int(1, max_dim)
    shrink(dims) |> List.to_tuple()
  end

  defp shrink(dims) do
    if Enum.product(dims) > @max_elems,
      do: dims |> Enum.map(&max(1, div(&1, 2))) |> shrink(),
      else: dims
  end

  @doc "A shape `shape` broadcasts against: a suffix with some dims set to 1."
  def broadcastable(shape) do
    dims = Tuple.to_list(shape)
    suffix = Enum.drop(dims, int(0, length(dims)))
    suffix |> Enum.map(&if(chance(0.3), do: 1, else: &1)) |> List.to_tuple()
  end

  def names(shape) do
    if chance(0.2),
      do: for(i <- 1..tuple_size(shape)//1, do: pick([nil, :"n#{i}"])),
      else: List.duplicate(nil, tuple_size(shape))
  end

  ## Tensors

  @doc """
  A tensor on Nx.BinaryBackend. Options:

    * `:domain` - `{lo, hi}` float range, or `:any` (the default)
    * `:edges` - probability of each element being an edge value (NaN,
      ±Inf, ±0.0, subnormal, extreme ints) (default 0.1)
    * `:names` - whether to name axes at random (default true)
  """
  def tensor(type, shape, opts \\ []) do
    n = Tuple.product(shape)
    type = Nx.Type.normalize!(type)
    values = for _ <- List.duplicate(nil, n), do: value(type, opts)

    t =
      case shape do
        {} -> Nx.tensor(hd(values), type: type, backend: Nx.BinaryBackend)
        _ -> Nx.tensor(values, type: type, backend: Nx.BinaryBackend) |> Nx.reshape(shape)
      end

    if Keyword.get(opts, :names, true), do: Nx.rename(t, names(shape)), else: t
  end

  def value({:c, _}, opts) do
    opts = Keyword.put(opts, :edges, 0.0)
    Complex.new(value({:f, 32}, opts), value({:f, 32}, opts))
  end

  def value({kind, _} = type, opts) when kind in [:f, :bf] do
    edges = Keyword.get(opts, :edges, 0.1)

    cond do
      chance(edges) ->
        pick(float_edges(type))

      (domain = Keyword.get(opts, :domain, :any)) != :any ->
        apply(&uniform/2, Tuple.to_list(domain))

      chance(0.2) ->
        int(-6, 6) * 1.0

      chance(0.1) ->
        int(-6, 6) + 0.5

      true ->
        :rand.normal() * pick([1.0, 1.0, 10.0, 0.01, 1000.0])
    end
  end

  def value({kind, bits} = type, opts) when kind in [:s, :u] do
    edges = Keyword.get(opts, :edges, 0.1)
    {lo, hi} = Keyword.get(opts, :range, int_small(type))

    if chance(edges),
      do:
        pick([
          Nx.Constants.min_finite(type) |> Nx.to_number(),
          Nx.Constants.max_finite(type) |> Nx.to_number(),
          0,
          1,
          bits - 1
        ]),
      else: int(lo, hi)
  end

  defp int_small({:u, _}), do: {0, 20}
  defp int_small({:s, _}), do: {-20, 20}

  defp float_edges(type) do
    subnormal =
      case type do
        {:f, 16} -> 6.0e-8
        {:bf, 16} -> 1.0e-39
        {:f, 32} -> 1.0e-40
        {:f, 64} -> 5.0e-320
      end

    max = Nx.Constants.max_finite(type) |> Nx.to_number()
    [:nan, :infinity, :neg_infinity, -0.0, 0.0, subnormal, -subnormal, max, -max, 1.0, -1.0]
  end

  @doc "An integer index tensor with values in `0..(n - 1)`."
  def indices(shape, n, type \\ nil) do
    type = type || pick([{:s, 32}, {:s, 64}, {:u, 8}, {:s, 16}])
    tensor(type, shape, range: {0, n - 1}, edges: 0.0, names: false)
  end

  @doc "A well-conditioned square matrix (batched by `batch`): `A + n I`."
  def well_conditioned(type, batch, n) do
    a =
      tensor(type, (batch ++ [n, n]) |> List.to_tuple(),
        domain: {-1.0, 1.0},
        edges: 0.0,
        names: false
      )

    Nx.add(a, Nx.multiply(Nx.eye(n, type: type, backend: Nx.BinaryBackend), n))
  end

  @doc "A symmetric (Hermitian) positive definite matrix: `B B* + n I`."
  def spd(type, batch, n) do
    b =
      tensor(type, (batch ++ [n, n]) |> List.to_tuple(),
        domain: {-1.0, 1.0},
        edges: 0.0,
        names: false
      )

    axes = Enum.to_list(0..(length(batch) - 1)//1)
    bt = Nx.transpose(b, axes: axes ++ [length(batch) + 1, length(batch)])
    bt = if match?({:c, _}, type), do: Nx.conjugate(bt), else: bt
    prod = Nx.dot(b, [length(batch) + 1], axes, bt, [length(batch)], axes)
    Nx.add(prod, Nx.multiply(Nx.eye(n, type: type, backend: Nx.BinaryBackend), n))
  end

  @doc "A number literal for a binary op: integer, float, or (rarely) complex."
  def literal(kind \\ pick([:int, :int, :float, :float, :complex])) do
    case kind do
      :int -> int(-5, 5)
      :float -> pick([0.5, -1.5, 2.0, 0.1, -3.25, 1.0e-3])
      :complex -> Complex.new(pick([0.5, -1.0]), pick([2.0, -0.25]))
    end
  end
end
