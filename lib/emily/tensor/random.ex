defmodule Emily.Tensor.Random do
  @moduledoc """
  Pseudo-random numbers with `Nx.Random`'s key-based API, reproducing Nx's
  (and JAX's) values bit for bit from the same key.

  A key is a `u32[2]` tensor made by `key/1`. Random functions never change
  a key: every sampler `f(key, ...)` splits it in two, samples with the
  second half and returns `{sample, new_key}` with the first half, so
  threading `new_key` through a program gives fresh numbers, and reusing a
  key gives the same numbers again:

      iex> key = Emily.Tensor.Random.key(12)
      iex> {uniform, _new_key} = Emily.Tensor.Random.uniform(key)
      iex> Emily.Tensor.to_number(uniform)
      0.7691127061843872

  The `*_split` variants take a key that has already been split and return
  only the sample.

  The generator is Threefry-2x32 with 20 rounds, computed by the engine
  (`Emily.Native.random_bits/3`, threaded over the output); floats are made
  from the random mantissa bits exactly as Nx does, and `normal/4` uses the
  same inverse error function as Nx's reference backend
  (`Emily.Native.random_erf_inv/1`) so its samples match to the last bit.
  `multivariate_normal/4` draws standard normals with `normal_split/4` and
  maps them through a factor of the covariance from `Emily.Tensor.LinAlg`.
  """

  alias Emily.Native
  alias Emily.Tensor.{Core, Type}

  import Bitwise, only: [&&&: 2, >>>: 2, <<<: 2]

  # ---------------------------------------------------------------------------
  # Keys
  # ---------------------------------------------------------------------------

  @doc """
  Creates a pseudo-random number generator (PRNG) key from an integer seed
  (or a u64/s64 tensor): `[seed >>> 32, seed &&& 0xFFFFFFFF]` as u32.

  A key from an integer is created on the default backend's device (as
  `Nx.Random.key/1` does), one from a tensor on that tensor's device; the
  samples drawn with a key are on the key's device.

  ## Examples

      iex> Emily.Tensor.Random.key(12)
      #Emily.Tensor<
        u32[2]
        [0, 12]
      >

      iex> Emily.Tensor.Random.key(999999999999)
      #Emily.Tensor<
        u32[2]
        [232, 3567587327]
      >
  """
  def key(seed) when is_integer(seed) do
    device = Core.device_for([])
    seed = seed &&& 0xFFFFFFFFFFFFFFFF
    bin = <<seed >>> 32::32-native, seed &&& 0xFFFFFFFF::32-native>>
    Core.wrap(Native.from_binary(bin, [2], {:u, 32})) |> Core.place(device)
  end

  def key(%Emily.Tensor{type: type} = seed) when type in [{:u, 64}, {:s, 64}] do
    s = if type == {:s, 64}, do: Native.bitcast(seed.ref, {:u, 64}), else: seed.ref
    hi = Native.right_shift(s, u64(32))
    lo = Native.bitwise_and(s, u64(0xFFFFFFFF))

    [hi, lo]
    |> Enum.map(&Native.expand_dims(Native.as_type(&1, {:u, 32}), 0))
    |> Native.concatenate(0)
    |> Core.wrap()
  end

  def key(other) do
    raise ArgumentError,
          "expected seed to be an integer, u64 tensor or s64 tensor, got: #{inspect(other)}"
  end

  @doc """
  Splits a PRNG key into `:parts` new keys (default 2), stacked on a
  leading axis.

  ## Examples

      iex> key = Emily.Tensor.Random.key(1701)
      iex> Emily.Tensor.Random.split(key)
      #Emily.Tensor<
        u32[2][2]
        [
          [56197195, 1801093307],
          [961309823, 1704866707]
        ]
      >

      iex> key = Emily.Tensor.Random.key(1701)
      iex> Emily.Tensor.Random.split(key, parts: 4)
      #Emily.Tensor<
        u32[4][2]
        [
          [4000152724, 2030591747],
          [2287976877, 2598630646],
          [2426625787, 580268518],
          [3136765380, 433355682]
        ]
      >
  """
  def split(key, opts \\ []) do
    key = key!(key)
    opts = Core.options!(opts, parts: 2)
    parts = opts[:parts]

    unless is_integer(parts) and parts >= 1 do
      raise ArgumentError, "expected :parts to be a positive integer, got: #{inspect(parts)}"
    end

    Core.wrap(Native.random_bits(key.ref, [parts, 2], {:u, 32}))
  end

  @doc """
  Folds new data into a PRNG key: each element of `data` (taken as u64)
  gives a key, so the result has shape `data.shape ++ {2}`.

  ## Examples

      iex> key = Emily.Tensor.Random.key(42)
      iex> Emily.Tensor.Random.fold_in(key, 99)
      #Emily.Tensor<
        u32[2]
        [2015327502, 1351855566]
      >

      iex> key = Emily.Tensor.Random.key(42)
      iex> Emily.Tensor.Random.fold_in(key, Emily.Tensor.tensor([[1, 99], [1234, 13]]))
      #Emily.Tensor<
        u32[2][2][2]
        [
          [
            [64467757, 2916123636],
            [2015327502, 1351855566]
          ],
          [
            [1356445167, 2917756949],
            [3514951389, 229662949]
          ]
        ]
      >
  """
  def fold_in(key, data) do
    key = key!(key)
    d = Native.as_type(Core.to_tensor(data).ref, {:u, 64})
    rank = length(Native.shape(d))
    hi = Native.as_type(Native.right_shift(d, u64(32)), {:u, 32})
    lo = Native.as_type(Native.bitwise_and(d, u64(0xFFFFFFFF)), {:u, 32})
    pairs = Native.concatenate([Native.expand_dims(hi, rank), Native.expand_dims(lo, rank)], rank)
    Core.wrap(Native.threefry2x32(key.ref, pairs))
  end

  # ---------------------------------------------------------------------------
  # Integers
  # ---------------------------------------------------------------------------

  @doc """
  Samples uniform random integers in the half-open interval
  `[min_value, max_value)`. Returns `{sample, new_key}`.

  ## Options

    * `:type` - the integer type of the result (default: the merged type
      of `min_value` and `max_value`, s32 for integers)
    * `:shape` - the shape of the result (default `{}`)
    * `:names` - accepted for compatibility; named axes are not supported

  ## Examples

      iex> key = Emily.Tensor.Random.key(1701)
      iex> {randint, _new_key} = Emily.Tensor.Random.randint(key, 1, 100)
      iex> randint
      #Emily.Tensor<
        s32
        91
      >

      iex> key = Emily.Tensor.Random.key(1701)
      iex> {randint, _new_key} = Emily.Tensor.Random.randint(key, 1, 100, shape: {3, 2}, type: :u32)
      iex> randint
      #Emily.Tensor<
        u32[3][2]
        [
          [9, 20],
          [19, 6],
          [71, 15]
        ]
      >
  """
  def randint(key, min_value, max_value, opts \\ []) do
    {k0, k1} = split2(key)
    {randint_split(k1, min_value, max_value, opts), k0}
  end

  @doc "Same as `randint/4`, with a key that has already been split."
  def randint_split(key, min_value, max_value, opts \\ []) do
    key = key!(key)
    opts = Core.options!(opts, names: nil, type: nil, shape: {})
    shape = shape!(opts[:shape])

    type =
      if opts[:type],
        do: Type.normalize!(opts[:type]),
        else: Type.merge(Core.type_of(min_value), Core.type_of(max_value))

    unless Type.integer?(type) do
      raise ArgumentError, "expected integer type, got type #{inspect(type)}"
    end

    {_, nbits} = type
    utype = {:u, nbits}
    dims = Tuple.to_list(shape)

    bits = Native.random_bits(key.ref, [2 | dims], utype)
    hi = row(bits, 0, dims)
    lo = row(bits, 1, dims)

    min_t = Core.to_tensor(min_value)
    max_t = Core.to_tensor(max_value)
    diff_type = Type.merge(min_t.type, max_t.type)

    span =
      Native.subtract(Core.cast(max_t, diff_type).ref, Core.cast(min_t, diff_type).ref)
      |> Native.as_type(utype)
      |> Native.broadcast_to(dims)
      |> on_device_of(key)

    span64 = Native.as_type(span, {:u, 64})

    # ((2^(nbits/2) mod span)^2 mod span): 2^nbits mod span, without overflow.
    half = Native.remainder(u64(1 <<< div(nbits, 2)), span64)
    multiplier = Native.remainder(Native.multiply(half, half), span64)

    offset =
      Native.remainder(hi, span)
      |> Native.as_type({:u, 64})
      |> Native.multiply(multiplier)
      |> Native.add(Native.as_type(Native.remainder(lo, span), {:u, 64}))
      |> Native.remainder(span64)

    sum_type = Type.merge(min_t.type, {:u, 64})

    Native.add(
      Native.broadcast_to(Core.cast(min_t, sum_type).ref, dims) |> on_device_of(key),
      Native.as_type(offset, sum_type)
    )
    |> Native.as_type(type)
    |> Core.wrap()
  end

  # ---------------------------------------------------------------------------
  # Floats
  # ---------------------------------------------------------------------------

  @doc """
  Shortcut for `uniform(key, 0.0, 1.0, opts)`.
  """
  def uniform(key, opts \\ []) when is_list(opts), do: uniform(key, 0.0, 1.0, opts)

  @doc """
  Samples uniform floats in the half-open interval `[min_value, max_value)`.
  Returns `{sample, new_key}`.

  The random bits fill the mantissa of a float in `[1, 2)`; one is
  subtracted and the result scaled to the interval (and kept at or above
  `min_value`), so every representable step of `[0, 1)` at the type's
  precision is equally likely.

  ## Options

    * `:type` - a float or complex type (default: the merged type of the
      bounds made floating, f32 for numbers)
    * `:shape` - the shape of the result (default `{}`)
    * `:names` - accepted for compatibility; named axes are not supported

  ## Examples

      iex> key = Emily.Tensor.Random.key(1701)
      iex> {uniform, _new_key} = Emily.Tensor.Random.uniform(key)
      iex> uniform
      #Emily.Tensor<
        f32
        0.9728644
      >

      iex> key = Emily.Tensor.Random.key(1701)
      iex> {uniform, _new_key} = Emily.Tensor.Random.uniform(key, shape: {3, 2}, type: :f16)
      iex> uniform
      #Emily.Tensor<
        f16[3][2]
        [
          [0.754, 0.6484],
          [0.7295, 0.2148],
          [0.09766, 0.06934]
        ]
      >

      iex> key = Emily.Tensor.Random.key(1701)
      iex> {uniform, _new_key} = Emily.Tensor.Random.uniform(key, shape: {2, 2}, type: :c64)
      iex> uniform
      #Emily.Tensor<
        c64[2][2]
        [
          [0.18404806+0.65464616i, 0.55259156+0.11568141i],
          [0.6074585+0.81043756i, 0.2476865+0.2197547i]
        ]
      >
  """
  def uniform(key, min_value, max_value, opts \\ []) do
    {k0, k1} = split2(key)
    {uniform_split(k1, min_value, max_value, opts), k0}
  end

  @doc "Shortcut for `uniform_split(key, 0.0, 1.0, opts)`."
  def uniform_split(key, opts \\ []) when is_list(opts), do: uniform_split(key, 0.0, 1.0, opts)

  @doc "Same as `uniform/4`, with a key that has already been split."
  def uniform_split(key, min_value, max_value, opts \\ []) do
    key = key!(key)
    opts = Core.options!(opts, names: nil, type: nil, shape: {})
    type = float_type(min_value, max_value, opts)
    shape = shape!(opts[:shape])

    float_or_complex(type, shape, fn real_type, dims ->
      uniform_real(key, min_value, max_value, real_type, dims)
    end)
  end

  defp uniform_real(key, min_value, max_value, {_, nbits} = type, dims) do
    utype = {:u, nbits}
    min_t = Core.to_tensor(min_value) |> Core.cast(type)
    max_t = Core.to_tensor(max_value) |> Core.cast(type)
    one = Core.to_tensor(1.0, type).ref

    out =
      Native.random_bits(key.ref, dims, utype)
      |> Native.right_shift(scalar(nbits - mantissa_bits(type), utype))
      |> Native.bitwise_or(Native.bitcast(one, utype))
      |> Native.bitcast(type)
      |> Native.subtract(one)
      |> Native.multiply(Native.subtract(max_t.ref, min_t.ref))
      |> Native.add(min_t.ref)
      |> Native.maximum(min_t.ref)

    if Native.shape(out) != dims do
      raise ArgumentError,
            "the bounds of shapes #{inspect(min_t.shape)} and #{inspect(max_t.shape)} " <>
              "do not broadcast to the shape #{inspect(List.to_tuple(dims))}"
    end

    out
  end

  @doc """
  Shortcut for `normal(key, 0.0, 1.0, opts)`.
  """
  def normal(key, opts \\ []) when is_list(opts), do: normal(key, 0.0, 1.0, opts)

  @doc """
  Samples normally distributed floats with the given `mean` and
  `standard_deviation`. Returns `{sample, new_key}`.

  A uniform sample `u` in `[-1, 1)` (strictly above -1) becomes
  `sqrt(2) * erf_inv(u)`, scaled and shifted. Complex types draw the real
  and imaginary parts independently.

  ## Options

    * `:type` - a float or complex type (default: the merged type of
      `mean` and `standard_deviation` made floating, f32 for numbers)
    * `:shape` - the shape of the result (default `{}`)
    * `:names` - accepted for compatibility; named axes are not supported

  ## Examples

      iex> key = Emily.Tensor.Random.key(42)
      iex> {normal, _new_key} = Emily.Tensor.Random.normal(key)
      iex> normal
      #Emily.Tensor<
        f32
        1.3694695
      >

      iex> key = Emily.Tensor.Random.key(42)
      iex> {normal, _new_key} = Emily.Tensor.Random.normal(key, 0, 1, shape: {3, 2}, type: :f16)
      iex> normal
      #Emily.Tensor<
        f16[3][2]
        [
          [-0.3257, -0.772],
          [0.392, 0.534],
          [0.2708, -2.08]
        ]
      >

      iex> key = Emily.Tensor.Random.key(42)
      iex> {normal, _new_key} = Emily.Tensor.Random.normal(key, 0, 1, shape: {2, 2}, type: :c64)
      iex> normal
      #Emily.Tensor<
        c64[2][2]
        [
          [-0.7632761+0.86611277i, -0.1428289-0.7384796i],
          [0.6784615+0.41183108i, -2.2695384-0.3689095i]
        ]
      >
  """
  def normal(key, mean, standard_deviation, opts \\ []) do
    {k0, k1} = split2(key)
    {normal_split(k1, mean, standard_deviation, opts), k0}
  end

  @doc "Shortcut for `normal_split(key, 0.0, 1.0, opts)`."
  def normal_split(key, opts \\ []) when is_list(opts), do: normal_split(key, 0.0, 1.0, opts)

  @doc "Same as `normal/4`, with a key that has already been split."
  def normal_split(key, mean, standard_deviation, opts \\ []) do
    key = key!(key)
    opts = Core.options!(opts, names: nil, type: nil, shape: {})
    type = float_type(mean, standard_deviation, opts)
    shape = shape!(opts[:shape])

    float_or_complex(type, shape, fn real_type, dims ->
      u = uniform_real(key, next_after_minus_1(real_type), 1, real_type, dims)
      sqrt2 = Native.sqrt(Core.to_tensor(2, real_type).ref)
      z = Native.multiply(sqrt2, Native.random_erf_inv(u))
      std = Core.to_tensor(standard_deviation) |> Core.cast(real_type)
      mean = Core.to_tensor(mean) |> Core.cast(real_type)
      Native.add(Native.multiply(std.ref, z), mean.ref)
    end)
  end

  @doc """
  Samples from the multivariate normal distribution with the given `mean`
  (`{n}`) and `covariance` (`{n, n}`, symmetric positive semi-definite).
  Returns `{sample, new_key}`; the sample has shape `shape ++ {n}`.

  Standard normals `z` (from `normal_split/4`, shape `shape ++ {n}`) become
  `mean + z·Aᵀ`, where `A·Aᵀ = covariance` comes from `:method`:

    * `:cholesky` (default) - `A = Emily.Tensor.LinAlg.cholesky(covariance)`
      (needs a positive definite matrix)
    * `:svd` - `{u, s, _} = svd(covariance)`, `A = u·diag(sqrt(s))`
    * `:eigh` - `{s, u} = eigh(covariance)`, `A = u·diag(sqrt(s))`

  ## Options

    * `:type` - a float type (default: the merged type of `mean` and
      `covariance` made floating, f32 for integers)
    * `:shape` - the batch shape of the samples (default `{}`)
    * `:names` - accepted for compatibility; named axes are not supported
    * `:method` - `:cholesky`, `:svd` or `:eigh`

  ## Examples

      iex> key = Emily.Tensor.Random.key(12)
      iex> mean = Emily.Tensor.tensor([0, 10])
      iex> cov = Emily.Tensor.tensor([[1, 0], [0, 4]])
      iex> {sample, _new_key} = Emily.Tensor.Random.multivariate_normal(key, mean, cov, shape: {3})
      iex> {Emily.Tensor.shape(sample), Emily.Tensor.type(sample)}
      {{3, 2}, {:f, 32}}

      iex> key = Emily.Tensor.Random.key(12)
      iex> cov = Emily.Tensor.tensor([[1.0, 0.0], [0.0, 0.0]])
      iex> {sample, _} = Emily.Tensor.Random.multivariate_normal(key, Emily.Tensor.tensor([0.0, 5.0]), cov, method: :svd)
      iex> Emily.Tensor.to_list(sample) |> List.last()
      5.0
  """
  def multivariate_normal(key, mean, covariance, opts \\ []) do
    {k0, k1} = split2(key)
    {multivariate_normal_split(k1, mean, covariance, opts), k0}
  end

  @doc "Same as `multivariate_normal/4`, with a key that has already been split."
  def multivariate_normal_split(key, mean, covariance, opts \\ []) do
    key = key!(key)
    opts = Core.options!(opts, names: nil, type: nil, shape: {}, method: :cholesky)
    mean = Core.to_tensor(mean)
    covariance = Core.to_tensor(covariance)
    type = float_type(mean, covariance, opts)

    unless match?({kind, _} when kind in [:f, :bf], type) do
      raise ArgumentError, "expected type to be a float type, got: #{inspect(type)}"
    end

    n =
      case mean.shape do
        {n} ->
          n

        other ->
          raise ArgumentError,
                "expected mean to have rank 1, got tensor with shape #{inspect(other)}"
      end

    unless covariance.shape == {n, n} do
      raise ArgumentError,
            "expected covariance to have shape #{inspect({n, n})} (the mean has shape #{inspect(mean.shape)}), " <>
              "got shape #{inspect(covariance.shape)}"
    end

    shape = shape!(opts[:shape])
    cov = Core.cast(covariance, type)

    factor =
      case opts[:method] do
        :cholesky ->
          Emily.Tensor.LinAlg.cholesky(cov)

        :svd ->
          {u, s, _vt} = Emily.Tensor.LinAlg.svd(cov)
          Emily.Tensor.multiply(u, Emily.Tensor.sqrt(s))

        :eigh ->
          {s, u} = Emily.Tensor.LinAlg.eigh(cov)
          Emily.Tensor.multiply(u, Emily.Tensor.sqrt(s))

        other ->
          raise ArgumentError,
                "expected :method to be one of :cholesky, :svd or :eigh, got: #{inspect(other)}"
      end

    factor = Core.cast(factor, type)
    z = normal_split(key, 0.0, 1.0, shape: Tuple.append(shape, n), type: type)
    rank = tuple_size(z.shape)
    correlated = Emily.Tensor.dot(z, [rank - 1], factor, [1])
    Emily.Tensor.add(Core.cast(mean, type), correlated) |> Core.cast(type)
  end

  @doc """
  Samples from the standard Gumbel distribution. Returns `{sample, new_key}`.

  ## Options

    * `:shape` - the shape of the result (default `{}`)
    * `:type` - a float type (default f32)

  ## Examples

      iex> {result, _key} = Emily.Tensor.Random.gumbel(Emily.Tensor.Random.key(1))
      iex> result
      #Emily.Tensor<
        f32
        -0.729461
      >

      iex> {result, _key} = Emily.Tensor.Random.gumbel(Emily.Tensor.Random.key(1), shape: {2, 3})
      iex> result
      #Emily.Tensor<
        f32[2][3]
        [
          [0.6247938, -0.21740718, 0.76783276],
          [0.77784044, 4.0895305, 0.30290902]
        ]
      >
  """
  def gumbel(key, opts \\ []) do
    {k0, k1} = split2(key)
    {gumbel_split(k1, opts), k0}
  end

  @doc "Same as `gumbel/2`, with a key that has already been split."
  def gumbel_split(key, opts \\ []) do
    key = key!(key)
    opts = Core.options!(opts, shape: {}, type: {:f, 32})
    type = Type.normalize!(opts[:type])
    shape = shape!(opts[:shape])

    unless Type.float?(type) do
      raise ArgumentError, "output type must be floating-point, got: #{inspect(type)}"
    end

    u = uniform_real(key, smallest_positive_normal(type), 1, type, Tuple.to_list(shape))
    # -log(-log(u)), each log rounded to the type as its own op.
    u
    |> log_in(type)
    |> Native.negate()
    |> log_in(type)
    |> Native.negate()
    |> Core.wrap()
  end

  # ---------------------------------------------------------------------------
  # Permutations and sampling
  # ---------------------------------------------------------------------------

  @doc """
  Shuffles the elements of `tensor` along an axis. Returns
  `{shuffled, new_key}`.

  ## Options

    * `:axis` - the axis to shuffle along (default `0`)
    * `:independent` - when `true`, every lane along the axis gets its own
      permutation; otherwise the slices along the axis are permuted as
      wholes (default `false`)

  ## Examples

      iex> key = Emily.Tensor.Random.key(42)
      iex> {shuffled, _new_key} = Emily.Tensor.Random.shuffle(key, Emily.Tensor.iota({3, 4}, axis: 0))
      iex> shuffled
      #Emily.Tensor<
        s32[3][4]
        [
          [2, 2, 2, 2],
          [0, 0, 0, 0],
          [1, 1, 1, 1]
        ]
      >

      iex> key = Emily.Tensor.Random.key(10)
      iex> {shuffled, _new_key} = Emily.Tensor.Random.shuffle(key, Emily.Tensor.iota({3, 4}, axis: 1), independent: true, axis: 1)
      iex> shuffled
      #Emily.Tensor<
        s32[3][4]
        [
          [2, 1, 3, 0],
          [3, 0, 1, 2],
          [2, 3, 0, 1]
        ]
      >
  """
  def shuffle(key, tensor, opts \\ []) do
    key = key!(key)
    opts = Core.options!(opts, axis: 0, independent: false)
    t = Core.to_tensor(tensor)
    axis = Core.axis!(opts[:axis], tuple_size(t.shape))

    if opts[:independent] do
      {out, key} = sort_shuffle(key, t.ref, axis)
      {Core.wrap(out), key}
    else
      n = elem(t.shape, axis)
      {idx, key} = sort_shuffle(key, Native.iota([n], 0, {:s, 32}) |> on_device_of(key), 0)
      {Core.wrap(Emily.take(t.ref, idx, axis)), key}
    end
  end

  # Rounds of "sort by fresh random u32 keys": ceil(3 ln(size) / ln(2^32 - 1))
  # computed in f32 as Nx does (one round up to ~1600 elements).
  defp sort_shuffle(key, ref, axis) do
    size = Enum.reduce(Native.shape(ref), 1, &(&1 * &2))
    rounds = shuffle_rounds(size)
    dims = Native.shape(ref)

    Enum.reduce(1..rounds//1, {ref, key}, fn _, {ref, key} ->
      {k0, k1} = split2(key)
      sort_keys = Native.random_bits(k1.ref, dims, {:u, 32})
      idx = Native.argsort(sort_keys, axis, false, {:s, 32})
      {Emily.take_along_axis(ref, idx, axis), k0}
    end)
  end

  defp shuffle_rounds(size) when size <= 1, do: 0

  defp shuffle_rounds(size) do
    log_n = f32(:math.log(size))
    log_max = f32(:math.log(4_294_967_295))
    ceil(f32(f32(3 * log_n) / log_max))
  end

  @doc """
  Draws random samples from `tensor`, without probabilities
  (`choice(key, tensor, opts)`) or with the probabilities `p`
  (`choice(key, tensor, p, opts)`; `p` is 1-D with one entry per element
  of the sampled axis). Returns `{samples, new_key}`.

  ## Options

    * `:samples` - the number of samples (default 1)
    * `:axis` - the axis to sample along; `nil` (default) flattens the
      tensor first
    * `:replace` - whether to sample with replacement (default `true`)

  ## Examples

      iex> k = Emily.Tensor.Random.key(1)
      iex> t = Emily.Tensor.iota({4, 3})
      iex> {result, _key} = Emily.Tensor.Random.choice(k, t, samples: 4, axis: 0)
      iex> result
      #Emily.Tensor<
        s32[4][3]
        [
          [6, 7, 8],
          [9, 10, 11],
          [6, 7, 8],
          [0, 1, 2]
        ]
      >
      iex> {result, _key} = Emily.Tensor.Random.choice(k, t, samples: 4, axis: 0, replace: false)
      iex> result
      #Emily.Tensor<
        s32[4][3]
        [
          [3, 4, 5],
          [9, 10, 11],
          [6, 7, 8],
          [0, 1, 2]
        ]
      >

      iex> k = Emily.Tensor.Random.key(2)
      iex> t = Emily.Tensor.iota({2, 3})
      iex> p = Emily.Tensor.tensor([0.01, 0.1, 0.19, 0.6, 0.05, 0.05])
      iex> {result, _key} = Emily.Tensor.Random.choice(k, t, p, samples: 6)
      iex> result
      #Emily.Tensor<
        s32[6]
        [3, 3, 3, 0, 3, 3]
      >
  """
  def choice(key, tensor, opts \\ [])

  def choice(key, tensor, p) when not is_list(p), do: choice(key, tensor, p, [])

  def choice(key, tensor, opts) do
    key = key!(key)
    t = Core.to_tensor(tensor)
    {ref, n_inputs, n_draws, axis, replace} = choice_opts!(t, opts)

    if replace do
      {idx, key} = randint(key, 0, n_inputs, shape: {n_draws}, type: :u32)
      {Core.wrap(Emily.take(ref, idx.ref, axis)), key}
    else
      {shuffled, key} = shuffle(key, Core.wrap(ref), axis: axis)
      {slice_axis(shuffled, axis, n_draws), key}
    end
  end

  def choice(key, tensor, p, opts) do
    key = key!(key)
    t = Core.to_tensor(tensor)
    {ref, n_inputs, n_draws, axis, replace} = choice_opts!(t, opts)
    p = Core.to_tensor(p)

    if tuple_size(p.shape) != 1 do
      raise ArgumentError, "probability tensor must have rank 1, got: #{tuple_size(p.shape)}"
    end

    axis_size = Enum.at(Native.shape(ref), axis)

    if elem(p.shape, 0) != axis_size do
      raise ArgumentError,
            "probability tensor of size #{elem(p.shape, 0)} is expected to have size #{axis_size}"
    end

    if replace do
      # Inverse-CDF sampling: the first index whose cumulative probability
      # exceeds total * (1 - u).
      cum = Emily.Tensor.Cumulative.cumulative_sum(p)
      {u, key} = uniform(key, shape: {n_draws}, type: cum.type)
      total = Native.slice(cum.ref, [n_inputs - 1], [n_inputs], [1])
      one = Core.to_tensor(1, Type.merge_number(u.type, 1)).ref
      r = Native.multiply(total, Native.subtract(one, Native.as_type(u.ref, cum.type)))
      below = Native.less_equal(Native.expand_dims(cum.ref, 0), Native.expand_dims(r, 1))
      idx = Native.argmin(Native.bitcast(below, {:u, 8}), 1, false, false, {:s, 32})
      {Core.wrap(Emily.take(ref, idx, axis)), key}
    else
      {g, key} = gumbel(key, shape: {n_inputs}, type: p.type)
      logp = log_in(p.ref, p.type)
      g = Native.subtract(Native.negate(g.ref), logp)
      idx = Native.argsort(g, 0, false, {:s, 32}) |> Native.slice([0], [n_draws], [1])
      {Core.wrap(Emily.take(ref, idx, axis)), key}
    end
  end

  defp choice_opts!(t, opts) do
    opts = Core.options!(opts, axis: nil, samples: 1, replace: true)

    if tuple_size(t.shape) < 1 do
      raise ArgumentError, "tensor must have rank 1 or greater"
    end

    {ref, axis} =
      case opts[:axis] do
        nil -> {Native.reshape(t.ref, [tuple_size_product(t.shape)]), 0}
        axis -> {t.ref, Core.axis!(axis, tuple_size(t.shape))}
      end

    n_draws = opts[:samples]

    unless is_integer(n_draws) and n_draws >= 1 do
      raise ArgumentError, "must take at least one sample, got samples=#{inspect(n_draws)}"
    end

    n_inputs = Enum.at(Native.shape(ref), axis)
    replace = opts[:replace]

    if not replace and n_draws > n_inputs do
      raise ArgumentError, "cannot take more samples than the input size when replace: false"
    end

    {ref, n_inputs, n_draws, axis, replace}
  end

  # ---------------------------------------------------------------------------
  # Helpers
  # ---------------------------------------------------------------------------

  defp key!(%Emily.Tensor{shape: {2}, type: {:u, 32}} = key), do: key

  defp key!(%Emily.Tensor{shape: {2}, type: type}) do
    raise ArgumentError,
          "expected key with 32-bit unsigned integer type, got key with type #{inspect(type)}"
  end

  defp key!(%Emily.Tensor{shape: shape}) do
    raise ArgumentError, "expected key to have shape {2}, got tensor with shape #{inspect(shape)}"
  end

  defp key!(other),
    do: raise(ArgumentError, "expected a key tensor (u32[2]), got: #{inspect(other)}")

  # `ref`, built from numbers only (so on the engine's default device, the
  # CPU), moved to the device of `like` (the key).
  defp on_device_of(ref, %Emily.Tensor{ref: like}) do
    device = Native.array_device(like)
    if Native.array_device(ref) == device, do: ref, else: Native.to_device(ref, device)
  end

  # {keys[0], keys[1]} of split(key).
  defp split2(key) do
    keys = split(key)
    {Core.wrap(row(keys.ref, 0, [2])), Core.wrap(row(keys.ref, 1, [2]))}
  end

  # Row i of a {rows, ...} ref, reshaped to dims.
  defp row(ref, i, dims) do
    [_ | rest] = Native.shape(ref)
    start = [i | Enum.map(rest, fn _ -> 0 end)]
    stop = [i + 1 | rest]
    strides = Enum.map(stop, fn _ -> 1 end)
    Native.reshape(Native.slice(ref, start, stop, strides), dims)
  end

  defp slice_axis(%Emily.Tensor{ref: ref}, axis, len) do
    shape = Native.shape(ref)
    start = Enum.map(shape, fn _ -> 0 end)
    stop = List.replace_at(shape, axis, len)
    Core.wrap(Native.slice(ref, start, stop, Enum.map(shape, fn _ -> 1 end)))
  end

  defp tuple_size_product(shape), do: shape |> Tuple.to_list() |> Enum.reduce(1, &(&1 * &2))

  defp shape!(shape) when is_tuple(shape) do
    dims = Tuple.to_list(shape)

    unless Enum.all?(dims, &(is_integer(&1) and &1 >= 0)) do
      raise ArgumentError,
            "expected :shape to be a tuple of non-negative integers, got: #{inspect(shape)}"
    end

    shape
  end

  defp shape!(%Emily.Tensor{shape: shape}), do: shape

  defp shape!(other),
    do: raise(ArgumentError, "expected :shape to be a tuple, got: #{inspect(other)}")

  defp float_type(left, right, opts) do
    if type = opts[:type] do
      Type.normalize!(type)
    else
      Type.to_floating(Type.merge(Core.type_of(left), Core.type_of(right)))
    end
  end

  # Real types are sampled directly; complex ones sample shape ++ {2} in the
  # real type and pair the last axis as (re, im).
  defp float_or_complex(type, shape, fun) do
    dims = Tuple.to_list(shape)

    case type do
      {:c, _} ->
        real = Type.to_real(type)
        data = fun.(real, dims ++ [2])
        re = Native.reshape(slice_last(data, 0, dims), dims) |> Native.as_type(type)
        im = Native.reshape(slice_last(data, 1, dims), dims) |> Native.as_type(type)
        i = Core.to_tensor(Emily.Complex.new(0.0, 1.0), type).ref
        Core.wrap(Native.add(re, Native.multiply(im, i)))

      {kind, _} when kind in [:f, :bf] ->
        Core.wrap(fun.(type, dims))

      _ ->
        raise ArgumentError, "expected float or complex type, got type #{inspect(type)}"
    end
  end

  defp slice_last(ref, i, dims) do
    start = Enum.map(dims, fn _ -> 0 end) ++ [i]
    stop = dims ++ [i + 1]
    Native.slice(ref, start, stop, Enum.map(stop, fn _ -> 1 end))
  end

  defp mantissa_bits({:bf, 16}), do: 7
  defp mantissa_bits({:f, 16}), do: 10
  defp mantissa_bits({:f, 32}), do: 23
  defp mantissa_bits({:f, 64}), do: 52

  # The float just above -1 in an IEEE format of the type's width (Nx uses
  # the f16 format for bf16 too, then converts).
  defp next_after_minus_1({_, bits}) do
    <<x::size(bits)-big>> = <<-1.0::float-size(bits)-big>>
    <<f::float-size(bits)-big>> = <<x - 1::size(bits)-big>>
    f
  end

  defp smallest_positive_normal({:f, 16}), do: 6.103515625e-5
  defp smallest_positive_normal({:bf, 16}), do: 1.1754943508222875e-38
  defp smallest_positive_normal({:f, 32}), do: 1.1754943508222875e-38
  defp smallest_positive_normal({:f, 64}), do: 2.2250738585072014e-308

  # log of a float ref rounded to `type` from a double-precision log (the
  # reference backend's rounding), so samples match to the last bit.
  defp log_in(ref, {:f, 64}), do: Native.log(ref)

  defp log_in(ref, type) do
    ref |> Native.as_type({:f, 64}) |> Native.log() |> Native.as_type(type)
  end

  defp u64(n), do: Native.from_binary(<<n::64-native>>, [], {:u, 64})
  defp scalar(n, {:u, bits} = type), do: Native.from_binary(<<n::size(bits)-native>>, [], type)

  defp f32(x) do
    <<y::float-32>> = <<x::float-32>>
    y
  end
end
