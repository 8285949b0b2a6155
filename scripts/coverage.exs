# Writes docs/COVERAGE.md: every public Nx function (Nx 0.13, from the
# project's Nx reference) and its status in Emily, read from the compiled
# modules themselves, so the table cannot claim what the code lacks.
#
#   mix run scripts/coverage.exs          # rewrite docs/COVERAGE.md
#   mix run scripts/coverage.exs --check  # exit 1 if the file is stale

groups = [
  {"Creation", Emily.Tensor,
   ~w(tensor/1..2 u8/1 u16/1 u32/1 u64/1 s8/1 s16/1 s32/1 s64/1 f16/1 bf16/1 f32/1 f64/1 c64/1 c128/1
      iota/1..2 eye/1..2 tri/2..3 tril/1..2 triu/1..2 take_diagonal/1..2 make_diagonal/1..2 put_diagonal/2..3
      from_binary/2..3 linspace/2..3 fill/2..3)},
  {"Conversion", Emily.Tensor,
   ~w(to_binary/1..2 to_flat_list/1..2 to_list/1 to_number/1 to_tensor/1 to_batched/2..3 to_heatmap/1..2
      serialize/1..2 deserialize/1..2 load_numpy!/1 load_numpy_archive!/1)},
  {"Type and shape", Emily.Tensor,
   ~w(type/1 shape/1 rank/1 size/1 flat_size/1 byte_size/1 bit_size/1 axes/1 axis_size/2 compatible?/2
      as_type/2 bitcast/2)},
  {"Shape ops", Emily.Tensor,
   ~w(reshape/2..3 flatten/1..2 new_axis/2..3 squeeze/1..2 tile/2 broadcast/2..3 transpose/1..2 reverse/1..2
      pad/3 pad_outer/3 concatenate/1..2 stack/1..2 split/2..3)},
  {"Element-wise unary", Emily.Tensor,
   ~w(exp/1 expm1/1 log/1 log1p/1 sigmoid/1 cos/1 sin/1 tan/1 cosh/1 sinh/1 tanh/1 acos/1 asin/1 atan/1
      acosh/1 asinh/1 atanh/1 sqrt/1 rsqrt/1 cbrt/1 erf/1 erfc/1 erf_inv/1 log/2 log2/1 log10/1 negate/1
      sign/1 abs/1 conjugate/1 real/1 imag/1 floor/1 ceil/1 round/1 is_nan/1 is_infinity/1 bitwise_not/1
      population_count/1 count_leading_zeros/1 phase/1 complex/2 logical_not/1)},
  {"Element-wise binary", Emily.Tensor,
   ~w(add/2 subtract/2 multiply/2 pow/2 remainder/2 divide/2 quotient/2 atan2/2 max/2 min/2 clip/3 select/3
      equal/2 not_equal/2 greater/2 less/2 greater_equal/2 less_equal/2 logical_and/2 logical_or/2
      logical_xor/2 bitwise_and/2 bitwise_or/2 bitwise_xor/2 left_shift/2 right_shift/2)},
  {"Reductions", Emily.Tensor,
   ~w(all/1..2 any/1..2 sum/1..2 product/1..2 reduce_max/1..2 reduce_min/1..2 argmax/1..2 argmin/1..2
      mean/1..2 weighted_mean/2..3 median/1..2 mode/1..2 variance/1..2 standard_deviation/1..2
      covariance/1..3 logsumexp/1..2 all_close/2..3 reduce/3..4)},
  {"Cumulative", Emily.Tensor,
   ~w(cumulative_sum/1..2 cumulative_product/1..2 cumulative_min/1..2 cumulative_max/1..2 diff/1..2)},
  {"Indexing", Emily.Tensor,
   ~w(slice/3..4 slice_along_axis/3..4 put_slice/3 take/2..3 take_along_axis/2..3 gather/2..3
      indexed_add/3..4 indexed_put/3..4)},
  {"Sorting", Emily.Tensor, ~w(sort/1..2 argsort/1..2 top_k/1..2)},
  {"Dot, convolution, windows", Emily.Tensor,
   ~w(dot/2 dot/4 dot/6 outer/2 conv/2..3 window_sum/2..3 window_product/2..3 window_max/2..3
      window_min/2..3 window_mean/2..3 window_reduce/4..5 window_scatter_max/4..5 window_scatter_min/4..5)},
  {"FFT", Emily.Tensor, ~w(fft/1..2 ifft/1..2 fft2/1..2 ifft2/1..2 rfft/1..2 irfft/1..2)},
  {"Backend and runtime", Emily.Tensor,
   ~w(template/2..3 to_template/1 default_backend/0..1 global_default_backend/1 with_default_backend/2
      backend_copy/1..2 backend_transfer/1..2 backend_deallocate/1 io_call/2..3 runtime_call/3..4 block/4
      donatable/1 donatable?/1 to_pointer/1..2 from_pointer/4..5 sigil_MAT/2 sigil_VEC/2)},
  {"Nx.LinAlg", Emily.Tensor.LinAlg,
   ~w(adjoint/1 cholesky/1 triangular_solve/2..3 solve/2 invert/1 qr/1..2 pinv/1..2 eigh/1..2 svd/1..2
      lu/1 determinant/1 matrix_power/2 norm/1..2 matrix_rank/1..2 least_squares/2..3)},
  {"Nx.Random", Emily.Tensor.Random,
   ~w(key/1 split/1..2 fold_in/2 randint/3..4 randint_split/3..4 uniform/1..4 uniform_split/1..4
      normal/1..4 normal_split/1..4 multivariate_normal/3..4 multivariate_normal_split/3..4 shuffle/2..3
      choice/2..4 gumbel/1..2 gumbel_split/1..2)},
  {"Nx.Constants", Emily.Tensor.Constants,
   ~w(nan/0..2 infinity/0..2 neg_infinity/0..2 max_finite/1..2 min_finite/1..2 max/1..2 min/1..2
      smallest_positive_normal/1..2 epsilon/1..2 pi/0..2 e/0..2 euler_gamma/0..2 i/0..2)}
]

# Out of scope by design, with the reason shown in the table.
not_applicable = %{
  "Named axes, vectorization" =>
    ~w(names/1 rename/2 axis_index/2 vectorize/2 devectorize/1..2 revectorize/2..3 reshape_vectors/1..2
       broadcast_vectors/1..2)
}

parse = fn spec ->
  [name, arities] = String.split(spec, "/")

  arities =
    case String.split(arities, "..") do
      [a] -> [String.to_integer(a)]
      [a, b] -> Enum.to_list(String.to_integer(a)..String.to_integer(b))
    end

  {String.to_atom(name), arities}
end

status = fn module, spec ->
  {name, arities} = parse.(spec)
  Code.ensure_loaded(module)
  # The sigils are macros.
  have =
    Enum.filter(arities, &(function_exported?(module, name, &1) or macro_exported?(module, name, &1)))

  cond do
    have == arities -> "done"
    have == [] -> "missing"
    true -> "partial (#{Enum.map_join(have, ", ", &"/#{&1}")})"
  end
end

rows =
  for {group, module, specs} <- groups, spec <- specs do
    "| #{group} | `#{spec}` | #{status.(module, spec)} |"
  end

na_rows =
  for {reason, specs} <- not_applicable, spec <- specs do
    "| — | `#{spec}` | not applicable: #{reason} |"
  end

counts =
  rows
  |> Enum.map(fn row -> row |> String.split(" | ") |> List.last() |> String.trim_trailing(" |") end)
  |> Enum.frequencies_by(fn s -> if String.starts_with?(s, "partial"), do: "partial", else: s end)

text = """
# Nx coverage of Emily.Tensor

Generated by `mix run scripts/coverage.exs` from the compiled modules (a function is "done" when
`Emily.Tensor` or the named module exports every arity Nx has, as a function or a macro). Functions of `Nx.LinAlg`,
`Nx.Random` and `Nx.Constants` live in `Emily.Tensor.LinAlg`, `Emily.Tensor.Random` and
`Emily.Tensor.Constants`.

Summary: #{Enum.map_join(Enum.sort(counts), ", ", fn {k, v} -> "#{v} #{k}" end)}; #{length(na_rows)} not applicable.

| group | Nx function | status |
| --- | --- | --- |
#{Enum.join(rows ++ na_rows, "\n")}
"""

path = Path.join(File.cwd!(), "docs/COVERAGE.md")

if "--check" in System.argv() do
  if File.read(path) != {:ok, text} do
    IO.puts(:stderr, "docs/COVERAGE.md is stale: run `mix run scripts/coverage.exs`")
    System.halt(1)
  end
else
  File.write!(path, text)
  IO.puts("wrote docs/COVERAGE.md: " <> Enum.map_join(Enum.sort(counts), ", ", fn {k, v} -> "#{v} #{k}" end))
end
