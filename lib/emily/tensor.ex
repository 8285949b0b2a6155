defmodule Emily.Tensor do
  @moduledoc """
  Tensors for Elixir with Nx's API, computed by Emily's engine.

  `Emily.Tensor` mirrors `Nx`: the same function names, argument order,
  options (unknown options raise), type promotion, broadcasting and
  printing, so code written against `Nx` runs after renaming the module.
  A tensor is `%Emily.Tensor{ref: engine_ref, shape: tuple, type: {kind, bits}}`;
  operations are lazy in the engine and evaluated when data is read
  (`to_binary/1`, `to_list/1`, `inspect/1`, ...).

      iex> t = Emily.Tensor.tensor([[1, 2], [3, 4]])
      iex> Emily.Tensor.add(t, 1) |> Emily.Tensor.to_list()
      [[2, 3], [4, 5]]

  Functions live in implementation modules by family and are delegated
  from here; each delegate's documentation links to its implementation:

    * `Emily.Tensor.Creation` — tensor/2, from_binary, to_* conversions,
      metadata, iota, eye, fill, tri ...
    * `Emily.Tensor.Elementwise` — unary math, binary arithmetic,
      comparisons, logical and bitwise ops, select, clip ...
    * `Emily.Tensor.Reduction` — sum, product, reduce_max/min, mean,
      variance, median, argmax ...
    * `Emily.Tensor.ShapeOps` — reshape, transpose, pad, concatenate,
      slice, dot ...
    * `Emily.Tensor.Backend` — the default backend and device,
      backend_copy/transfer/deallocate, to_pointer/from_pointer
    * `Emily.Tensor.Template` — templates, donatable, runtime_call,
      io_call, block; `sigil_MAT/2` and `sigil_VEC/2` are here

  Differences from Nx: named axes, vectorization and defn are out of
  scope (see `docs/COVERAGE.md`); sub-byte and 8-bit float types are not
  supported; complex scalars are `Emily.Complex` structs.
  """

  @enforce_keys [:ref, :shape, :type]
  defstruct [:ref, :shape, :type, donatable: false]

  # `ref` is the atom :template for a template (shape and type, no data).
  @type t :: %__MODULE__{
          ref: reference() | :template,
          shape: tuple(),
          type: Emily.Tensor.Type.t(),
          donatable: boolean()
        }

  # Each implementation module owns one region below; keep edits inside
  # your own region (`defdelegate name(args), to: Module`).

  # -- BEGIN creation --
  @doc """
  A guard that holds for tensors, numbers and `Emily.Complex` values (what
  the `Emily.Tensor` functions accept as tensors). `require Emily.Tensor`
  to use it.
  """
  defguard is_tensor(t)
           when is_number(t) or is_struct(t, Emily.Tensor) or is_struct(t, Emily.Complex)

  @doc "See `Emily.Tensor.Creation.tensor/2`."
  defdelegate tensor(arg, opts \\ []), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.to_list/1`."
  defdelegate to_list(tensor), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.to_flat_list/2`."
  defdelegate to_flat_list(tensor, opts \\ []), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.to_number/1`."
  defdelegate to_number(tensor), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.to_binary/2`."
  defdelegate to_binary(tensor, opts \\ []), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.from_binary/3`."
  defdelegate from_binary(binary, type, opts \\ []), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.to_batched/3`."
  defdelegate to_batched(tensor, batch_size, opts \\ []), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.shape/1`."
  defdelegate shape(tensor_or_shape), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.type/1`."
  defdelegate type(tensor), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.rank/1`."
  defdelegate rank(tensor_or_shape), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.size/1`."
  defdelegate size(tensor_or_shape), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.flat_size/1`."
  defdelegate flat_size(tensor_or_shape), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.byte_size/1`."
  defdelegate byte_size(tensor), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.bit_size/1`."
  defdelegate bit_size(tensor), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.axes/1`."
  defdelegate axes(tensor_or_shape), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.axis_size/2`."
  defdelegate axis_size(tensor_or_shape, axis), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.compatible?/2`."
  defdelegate compatible?(left, right), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.to_tensor/1`."
  defdelegate to_tensor(x), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.as_type/2`."
  defdelegate as_type(tensor, type), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.bitcast/2`."
  defdelegate bitcast(tensor, type), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.iota/2`."
  defdelegate iota(tensor_or_shape, opts \\ []), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.eye/2`."
  defdelegate eye(n_or_shape, opts \\ []), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.fill/3`."
  defdelegate fill(tensor, value, opts \\ []), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.tri/3`."
  defdelegate tri(n, m, opts \\ []), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.tril/2`."
  defdelegate tril(tensor, opts \\ []), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.triu/2`."
  defdelegate triu(tensor, opts \\ []), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.linspace/3`."
  defdelegate linspace(start, stop, opts \\ []), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.u8/1`."
  defdelegate u8(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.u16/1`."
  defdelegate u16(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.u32/1`."
  defdelegate u32(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.u64/1`."
  defdelegate u64(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.s8/1`."
  defdelegate s8(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.s16/1`."
  defdelegate s16(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.s32/1`."
  defdelegate s32(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.s64/1`."
  defdelegate s64(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.f16/1`."
  defdelegate f16(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.bf16/1`."
  defdelegate bf16(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.f32/1`."
  defdelegate f32(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.f64/1`."
  defdelegate f64(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.c64/1`."
  defdelegate c64(value), to: Emily.Tensor.Creation

  @doc "See `Emily.Tensor.Creation.c128/1`."
  defdelegate c128(value), to: Emily.Tensor.Creation
  # -- END creation --

  # -- BEGIN elementwise --
  @doc "See `Emily.Tensor.Elementwise.exp/1`."
  defdelegate exp(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.expm1/1`."
  defdelegate expm1(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.log/1`."
  defdelegate log(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.log1p/1`."
  defdelegate log1p(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.sigmoid/1`."
  defdelegate sigmoid(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.cos/1`."
  defdelegate cos(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.sin/1`."
  defdelegate sin(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.tan/1`."
  defdelegate tan(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.cosh/1`."
  defdelegate cosh(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.sinh/1`."
  defdelegate sinh(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.tanh/1`."
  defdelegate tanh(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.acos/1`."
  defdelegate acos(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.asin/1`."
  defdelegate asin(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.atan/1`."
  defdelegate atan(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.acosh/1`."
  defdelegate acosh(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.asinh/1`."
  defdelegate asinh(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.atanh/1`."
  defdelegate atanh(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.sqrt/1`."
  defdelegate sqrt(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.rsqrt/1`."
  defdelegate rsqrt(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.cbrt/1`."
  defdelegate cbrt(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.erf/1`."
  defdelegate erf(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.erfc/1`."
  defdelegate erfc(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.erf_inv/1`."
  defdelegate erf_inv(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.log2/1`."
  defdelegate log2(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.log10/1`."
  defdelegate log10(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.negate/1`."
  defdelegate negate(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.sign/1`."
  defdelegate sign(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.abs/1`."
  defdelegate abs(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.floor/1`."
  defdelegate floor(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.ceil/1`."
  defdelegate ceil(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.round/1`."
  defdelegate round(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.is_nan/1`."
  defdelegate is_nan(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.is_infinity/1`."
  defdelegate is_infinity(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.logical_not/1`."
  defdelegate logical_not(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.bitwise_not/1`."
  defdelegate bitwise_not(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.population_count/1`."
  defdelegate population_count(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.count_leading_zeros/1`."
  defdelegate count_leading_zeros(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.conjugate/1`."
  defdelegate conjugate(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.real/1`."
  defdelegate real(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.imag/1`."
  defdelegate imag(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.phase/1`."
  defdelegate phase(tensor), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.log/2`."
  defdelegate log(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.complex/2`."
  defdelegate complex(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.add/2`."
  defdelegate add(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.subtract/2`."
  defdelegate subtract(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.multiply/2`."
  defdelegate multiply(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.pow/2`."
  defdelegate pow(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.remainder/2`."
  defdelegate remainder(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.divide/2`."
  defdelegate divide(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.quotient/2`."
  defdelegate quotient(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.atan2/2`."
  defdelegate atan2(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.max/2`."
  defdelegate max(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.min/2`."
  defdelegate min(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.bitwise_and/2`."
  defdelegate bitwise_and(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.bitwise_or/2`."
  defdelegate bitwise_or(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.bitwise_xor/2`."
  defdelegate bitwise_xor(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.left_shift/2`."
  defdelegate left_shift(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.right_shift/2`."
  defdelegate right_shift(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.equal/2`."
  defdelegate equal(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.not_equal/2`."
  defdelegate not_equal(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.greater/2`."
  defdelegate greater(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.less/2`."
  defdelegate less(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.greater_equal/2`."
  defdelegate greater_equal(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.less_equal/2`."
  defdelegate less_equal(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.logical_and/2`."
  defdelegate logical_and(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.logical_or/2`."
  defdelegate logical_or(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.logical_xor/2`."
  defdelegate logical_xor(left, right), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.select/3`."
  defdelegate select(pred, on_true, on_false), to: Emily.Tensor.Elementwise

  @doc "See `Emily.Tensor.Elementwise.clip/3`."
  defdelegate clip(tensor, min, max), to: Emily.Tensor.Elementwise
  # -- END elementwise --

  # -- BEGIN reduction --
  @doc "See `Emily.Tensor.Reduction.sum/2`."
  defdelegate sum(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.product/2`."
  defdelegate product(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.reduce_max/2`."
  defdelegate reduce_max(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.reduce_min/2`."
  defdelegate reduce_min(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.all/2`."
  defdelegate all(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.any/2`."
  defdelegate any(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.mean/2`."
  defdelegate mean(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.variance/2`."
  defdelegate variance(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.standard_deviation/2`."
  defdelegate standard_deviation(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.weighted_mean/3`."
  defdelegate weighted_mean(tensor, weights, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.logsumexp/2`."
  defdelegate logsumexp(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.median/2`."
  defdelegate median(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.mode/2`."
  defdelegate mode(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.argmax/2`."
  defdelegate argmax(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.argmin/2`."
  defdelegate argmin(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.all_close/3`."
  defdelegate all_close(a, b, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.sort/2`."
  defdelegate sort(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.argsort/2`."
  defdelegate argsort(tensor, opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.covariance/3`."
  defdelegate covariance(tensor, mean_or_opts \\ [], opts \\ []), to: Emily.Tensor.Reduction

  @doc "See `Emily.Tensor.Reduction.reduce/4`."
  defdelegate reduce(tensor, acc, opts \\ [], fun), to: Emily.Tensor.Reduction
  # -- END reduction --

  # -- BEGIN shape --
  @doc "See `Emily.Tensor.ShapeOps.reshape/3`."
  defdelegate reshape(tensor, shape, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.new_axis/3`."
  defdelegate new_axis(tensor, axis, name \\ nil), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.squeeze/2`."
  defdelegate squeeze(tensor, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.flatten/2`."
  defdelegate flatten(tensor, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.tile/2`."
  defdelegate tile(tensor, repetitions), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.broadcast/3`."
  defdelegate broadcast(tensor, shape, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.transpose/2`."
  defdelegate transpose(tensor, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.reverse/2`."
  defdelegate reverse(tensor, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.pad/3`."
  defdelegate pad(tensor, pad_value, padding_config), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.concatenate/2`."
  defdelegate concatenate(tensors, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.stack/2`."
  defdelegate stack(tensors, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.split/3`."
  defdelegate split(tensor, split, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.slice/4`."
  defdelegate slice(tensor, start_indices, lengths, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.slice_along_axis/4`."
  defdelegate slice_along_axis(tensor, start_index, len, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.put_slice/3`."
  defdelegate put_slice(tensor, start_indices, slice), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.take_diagonal/2`."
  defdelegate take_diagonal(tensor, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.make_diagonal/2`."
  defdelegate make_diagonal(tensor, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.put_diagonal/3`."
  defdelegate put_diagonal(tensor, diagonal, opts \\ []), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.dot/2`."
  defdelegate dot(a, b), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.dot/4`."
  defdelegate dot(a, contract_a, b, contract_b), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.dot/6`."
  defdelegate dot(a, contract_a, batch_a, b, contract_b, batch_b), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.outer/2`."
  defdelegate outer(a, b), to: Emily.Tensor.ShapeOps

  @doc "See `Emily.Tensor.ShapeOps.pad_outer/3`."
  defdelegate pad_outer(tensor, pad_value, padding_config), to: Emily.Tensor.ShapeOps
  # -- END shape --

  # -- BEGIN cumulative --
  @doc "See `Emily.Tensor.Cumulative.cumulative_sum/2`."
  defdelegate cumulative_sum(tensor, opts \\ []), to: Emily.Tensor.Cumulative

  @doc "See `Emily.Tensor.Cumulative.cumulative_product/2`."
  defdelegate cumulative_product(tensor, opts \\ []), to: Emily.Tensor.Cumulative

  @doc "See `Emily.Tensor.Cumulative.cumulative_max/2`."
  defdelegate cumulative_max(tensor, opts \\ []), to: Emily.Tensor.Cumulative

  @doc "See `Emily.Tensor.Cumulative.cumulative_min/2`."
  defdelegate cumulative_min(tensor, opts \\ []), to: Emily.Tensor.Cumulative

  @doc "See `Emily.Tensor.Cumulative.diff/2`."
  defdelegate diff(tensor, opts \\ []), to: Emily.Tensor.Cumulative
  # -- END cumulative --
  # -- BEGIN window_conv --
  @doc "See `Emily.Tensor.Window.window_sum/3`."
  defdelegate window_sum(tensor, window_dimensions, opts \\ []), to: Emily.Tensor.Window

  @doc "See `Emily.Tensor.Window.window_product/3`."
  defdelegate window_product(tensor, window_dimensions, opts \\ []), to: Emily.Tensor.Window

  @doc "See `Emily.Tensor.Window.window_max/3`."
  defdelegate window_max(tensor, window_dimensions, opts \\ []), to: Emily.Tensor.Window

  @doc "See `Emily.Tensor.Window.window_min/3`."
  defdelegate window_min(tensor, window_dimensions, opts \\ []), to: Emily.Tensor.Window

  @doc "See `Emily.Tensor.Window.window_mean/3`."
  defdelegate window_mean(tensor, window_dimensions, opts \\ []), to: Emily.Tensor.Window

  @doc "See `Emily.Tensor.Window.window_scatter_max/5`."
  defdelegate window_scatter_max(tensor, source, init_value, window_dimensions, opts \\ []),
    to: Emily.Tensor.Window

  @doc "See `Emily.Tensor.Window.window_scatter_min/5`."
  defdelegate window_scatter_min(tensor, source, init_value, window_dimensions, opts \\ []),
    to: Emily.Tensor.Window

  @doc "See `Emily.Tensor.Window.window_reduce/5`."
  defdelegate window_reduce(tensor, acc, window_dimensions, opts \\ [], fun),
    to: Emily.Tensor.Window

  @doc "See `Emily.Tensor.Conv.conv/3`."
  defdelegate conv(tensor, kernel, opts \\ []), to: Emily.Tensor.Conv
  # -- END window_conv --

  # -- BEGIN fft --
  @doc "See `Emily.Tensor.FFT.fft/2`."
  defdelegate fft(tensor, opts \\ []), to: Emily.Tensor.FFT

  @doc "See `Emily.Tensor.FFT.ifft/2`."
  defdelegate ifft(tensor, opts \\ []), to: Emily.Tensor.FFT

  @doc "See `Emily.Tensor.FFT.fft2/2`."
  defdelegate fft2(tensor, opts \\ []), to: Emily.Tensor.FFT

  @doc "See `Emily.Tensor.FFT.ifft2/2`."
  defdelegate ifft2(tensor, opts \\ []), to: Emily.Tensor.FFT

  @doc "See `Emily.Tensor.FFT.rfft/2`."
  defdelegate rfft(tensor, opts \\ []), to: Emily.Tensor.FFT

  @doc "See `Emily.Tensor.FFT.irfft/2`."
  defdelegate irfft(tensor, opts \\ []), to: Emily.Tensor.FFT
  # (linear algebra is its own module, Emily.Tensor.LinAlg, as Nx.LinAlg)
  # -- END fft --
  # -- BEGIN indexing --
  @doc "See `Emily.Tensor.Indexing.gather/3`."
  defdelegate gather(tensor, indices, opts \\ []), to: Emily.Tensor.Indexing
  @doc "See `Emily.Tensor.Indexing.take/3`."
  defdelegate take(tensor, indices, opts \\ []), to: Emily.Tensor.Indexing
  @doc "See `Emily.Tensor.Indexing.take_along_axis/3`."
  defdelegate take_along_axis(tensor, indices, opts \\ []), to: Emily.Tensor.Indexing
  @doc "See `Emily.Tensor.Indexing.indexed_add/4`."
  defdelegate indexed_add(tensor, indices, updates, opts \\ []), to: Emily.Tensor.Indexing
  @doc "See `Emily.Tensor.Indexing.indexed_put/4`."
  defdelegate indexed_put(tensor, indices, updates, opts \\ []), to: Emily.Tensor.Indexing
  @doc "See `Emily.Tensor.Indexing.top_k/2`."
  defdelegate top_k(tensor, opts \\ []), to: Emily.Tensor.Indexing
  # -- END indexing --

  # -- BEGIN serialization --
  @doc "See `Emily.Tensor.Serialization.serialize/2`."
  defdelegate serialize(data, opts \\ []), to: Emily.Tensor.Serialization
  @doc "See `Emily.Tensor.Serialization.deserialize/2`."
  defdelegate deserialize(binary, opts \\ []), to: Emily.Tensor.Serialization
  @doc "See `Emily.Tensor.Serialization.load_numpy!/1`."
  defdelegate load_numpy!(binary), to: Emily.Tensor.Serialization
  @doc "See `Emily.Tensor.Serialization.load_numpy_archive!/1`."
  defdelegate load_numpy_archive!(binary), to: Emily.Tensor.Serialization
  @doc "See `Emily.Tensor.Serialization.to_heatmap/2`."
  defdelegate to_heatmap(tensor, opts \\ []), to: Emily.Tensor.Serialization
  # -- END serialization --

  # -- BEGIN access --
  @behaviour Access
  @impl Access
  defdelegate fetch(tensor, index), to: Emily.Tensor.Access
  @impl Access
  defdelegate get_and_update(tensor, index, fun), to: Emily.Tensor.Access
  @impl Access
  defdelegate pop(tensor, index), to: Emily.Tensor.Access
  # -- END access --

  # -- BEGIN backend --
  @doc "See `Emily.Tensor.Backend.default_backend/0`."
  defdelegate default_backend(), to: Emily.Tensor.Backend
  @doc "See `Emily.Tensor.Backend.default_backend/1`."
  defdelegate default_backend(backend), to: Emily.Tensor.Backend
  @doc "See `Emily.Tensor.Backend.global_default_backend/1`."
  defdelegate global_default_backend(backend), to: Emily.Tensor.Backend
  @doc "See `Emily.Tensor.Backend.with_default_backend/2`."
  defdelegate with_default_backend(backend, fun), to: Emily.Tensor.Backend
  @doc "See `Emily.Tensor.Backend.backend_copy/2`."
  defdelegate backend_copy(container, backend \\ nil), to: Emily.Tensor.Backend
  @doc "See `Emily.Tensor.Backend.backend_transfer/2`."
  defdelegate backend_transfer(container, backend \\ nil), to: Emily.Tensor.Backend
  @doc "See `Emily.Tensor.Backend.backend_deallocate/1`."
  defdelegate backend_deallocate(container), to: Emily.Tensor.Backend
  @doc "See `Emily.Tensor.Backend.to_pointer/2`."
  defdelegate to_pointer(tensor, opts \\ []), to: Emily.Tensor.Backend
  @doc "See `Emily.Tensor.Backend.from_pointer/5`."
  defdelegate from_pointer(backend, pointer, type, shape, opts \\ []), to: Emily.Tensor.Backend
  @doc "See `Emily.Tensor.Template.template/3`."
  defdelegate template(shape, type, opts \\ []), to: Emily.Tensor.Template
  @doc "See `Emily.Tensor.Template.to_template/1`."
  defdelegate to_template(container), to: Emily.Tensor.Template
  @doc "See `Emily.Tensor.Template.donatable/1`."
  defdelegate donatable(tensor), to: Emily.Tensor.Template
  @doc "See `Emily.Tensor.Template.donatable?/1`."
  defdelegate donatable?(tensor), to: Emily.Tensor.Template
  @doc "See `Emily.Tensor.Template.runtime_call/3`."
  defdelegate runtime_call(output, tensor_or_container, fun), to: Emily.Tensor.Template
  @doc "See `Emily.Tensor.Template.runtime_call/4`."
  defdelegate runtime_call(output, tensor_or_container, static_argument, fun),
    to: Emily.Tensor.Template

  @doc "See `Emily.Tensor.Template.io_call/2`."
  defdelegate io_call(data, name_or_fun), to: Emily.Tensor.Template
  @doc "See `Emily.Tensor.Template.io_call/3`."
  defdelegate io_call(data, name, fun), to: Emily.Tensor.Template
  @doc "See `Emily.Tensor.Template.block/4`."
  defdelegate block(struct, args, output_template, default_fun), to: Emily.Tensor.Template

  @doc """
  A matrix (a rank-2 tensor) from rows of numbers, as Nx's `~MAT`: one
  row per line, numbers separated by spaces, the type as a modifier
  (inferred without one). The text is parsed at compile time; see
  `Emily.Tensor.Sigils` for the number syntax.
  `import Emily.Tensor, only: :sigils` (Elixir 1.15 and later) or
  `import Emily.Tensor, only: [sigil_MAT: 2, sigil_VEC: 2]` to use it.

  Elixir 1.15 and later write it `~MAT[1 2\\n3 4]f32`. Elixir 1.14 has no
  multi-letter sigils: call the macro, `sigil_MAT("1 2\\n3 4", "f32")`
  (the modifier a string or charlist literal).

  ## Examples

      iex> import Emily.Tensor, only: [sigil_MAT: 2, sigil_VEC: 2]
      iex> sigil_MAT(\"""
      ...>   1 2 3
      ...>   4 5 6
      ...> \""", "f32")
      #Emily.Tensor<
        f32[2][3]
        [
          [1.0, 2.0, 3.0],
          [4.0, 5.0, 6.0]
        ]
      >
      iex> sigil_MAT("1 -2i\\n inf 0.5", [])
      #Emily.Tensor<
        c64[2][2]
        [
          [1.0+0.0i, 0.0-2.0i],
          [Inf+0.0i, 0.5+0.0i]
        ]
      >

  """
  defmacro sigil_MAT(text, modifiers) do
    {rows, type} = Emily.Tensor.Sigils.expand(text, modifiers, :matrix)
    quote do: Emily.Tensor.tensor(unquote(Macro.escape(rows)), type: unquote(Macro.escape(type)))
  end

  @doc """
  A vector (a rank-1 tensor) from a row of numbers, as Nx's `~VEC`; the
  type is a modifier (inferred without one). See `sigil_MAT/2`
  (`~VEC[1 2 3]u8` from Elixir 1.15 on).

  ## Examples

      iex> import Emily.Tensor, only: [sigil_MAT: 2, sigil_VEC: 2]
      iex> sigil_VEC("1 2 3", "u8")
      #Emily.Tensor<
        u8[3]
        [1, 2, 3]
      >
      iex> sigil_VEC("0.5 nan -inf", [])
      #Emily.Tensor<
        f32[3]
        [0.5, NaN, -Inf]
      >

  """
  defmacro sigil_VEC(text, modifiers) do
    {row, type} = Emily.Tensor.Sigils.expand(text, modifiers, :vector)
    quote do: Emily.Tensor.tensor(unquote(Macro.escape(row)), type: unquote(Macro.escape(type)))
  end

  # -- END backend --

  # -- BEGIN device --
  @doc "See `Emily.Tensor.DeviceOps.to_device/2`."
  defdelegate to_device(tensor, device), to: Emily.Tensor.DeviceOps

  @doc "See `Emily.Tensor.DeviceOps.device/1`."
  defdelegate device(tensor), to: Emily.Tensor.DeviceOps
  # -- END device --
end
