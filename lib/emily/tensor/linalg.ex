defmodule Emily.Tensor.LinAlg do
  @moduledoc """
  Linear algebra with `Nx.LinAlg`'s API: factorizations (`cholesky/1`,
  `qr/2`, `lu/2`, `eigh/2`, `svd/2`), solvers (`triangular_solve/3`,
  `solve/2`, `least_squares/3`), `invert/1`, `determinant/1`, `pinv/2`,
  `norm/2`, `matrix_power/2`, `matrix_rank/2` and `adjoint/1`.

  Every function works on the last two axes and is batched over the
  leading ones. The factorizations run in the engine over LAPACK, one call
  per matrix (`include/emily_linalg.h`); results are f32/f64/c64/c128
  (integers are converted to f32 as Nx does; f16 and bf16 are computed in
  f32 and rounded back). The outputs of one factorization share one
  evaluation.

  Differences from Nx:

    * Results come from LAPACK, so wherever a factorization is not unique
      they may differ from Nx's binary backend: `eigh` returns eigenvalues
      in ascending order, `lu` pivots on the largest entry of each column,
      and the signs of eigenvectors and singular vectors are LAPACK's. `qr`
      follows Nx's sign convention (the diagonal of `r` has the sign of the
      pivot column's leading entry). The products (`q·r`, `p·l·u`, ...)
      reconstruct the input either way.
    * Errors that depend on the values (a singular matrix in `solve` and
      `triangular_solve`, a non positive-definite matrix in `cholesky`) are
      raised as `ArgumentError` when the result is evaluated (read or
      printed), since tensors are lazy.
    * `:eps` and `:max_iter` are accepted and ignored where LAPACK needs
      no tolerance.
  """

  alias Emily.Native
  alias Emily.Tensor.{Core, Type}

  import Core, only: [wrap: 1, ref!: 1]

  # ---- helpers ---------------------------------------------------------

  # The input as a LAPACK-ready tensor, and the type Nx gives the result.
  defp float_input(t) do
    t = Core.to_tensor(t)
    out = Type.to_floating(t.type)
    {Core.cast(t, compute_type(out)), out}
  end

  defp compute_type({kind, 16}) when kind in [:f, :bf], do: {:f, 32}
  defp compute_type(type), do: type

  defp finish(%Emily.Tensor{} = t, type), do: Core.cast(t, type)
  defp finish(ref, type), do: ref |> wrap() |> Core.cast(type)

  defp square?(shape) do
    r = tuple_size(shape)
    r >= 2 and elem(shape, r - 1) == elem(shape, r - 2)
  end

  defp un(op, %Emily.Tensor{ref: ref}), do: wrap(apply(Native, op, [ref]))

  defp bin(op, %Emily.Tensor{} = a, %Emily.Tensor{} = b) do
    type = Type.merge(a.type, b.type)
    wrap(apply(Native, op, [ref!(Core.cast(a, type)), ref!(Core.cast(b, type))]))
  end

  defp bin(op, %Emily.Tensor{type: type} = a, n) when is_number(n),
    do: bin(op, a, Core.to_tensor(n, type))

  defp bin(op, n, %Emily.Tensor{type: type} = b) when is_number(n),
    do: bin(op, Core.to_tensor(n, type), b)

  defp reduce(t, op, axes, keep), do: wrap(apply(Native, op, [ref!(t), axes, keep]))

  defp matmul(a, b), do: wrap(Emily.matmul(ref!(a), ref!(b)))

  defp select(pred, on_true, on_false),
    do: wrap(Native.select(ref!(pred), ref!(on_true), ref!(on_false)))

  defp swap_last(%Emily.Tensor{shape: shape} = t) do
    r = tuple_size(shape)
    perm = Enum.to_list(0..(r - 3)//1) ++ [r - 1, r - 2]
    wrap(Native.transpose(ref!(t), perm))
  end

  defp new_axis_last(%Emily.Tensor{shape: shape} = t),
    do: wrap(Native.reshape(ref!(t), Tuple.to_list(shape) ++ [1]))

  defp raise_complex!(%Emily.Tensor{type: {:c, _}}, name),
    do: raise(ArgumentError, "Nx.LinAlg.#{name} is not yet implemented for complex inputs")

  defp raise_complex!(_, _), do: :ok

  # ---- API ---------------------------------------------------------------

  @doc """
  The adjoint: the last two axes swapped, conjugated when complex (a 1-D
  tensor is returned as is, conjugated when complex).

      iex> Emily.Tensor.LinAlg.adjoint(Emily.Tensor.tensor([[1, 2], [3, 4]]))
      #Emily.Tensor<
        s32[2][2]
        [
          [1, 3],
          [2, 4]
        ]
      >
  """
  def adjoint(t) do
    t = Core.to_tensor(t)
    t = if tuple_size(t.shape) >= 2, do: swap_last(t), else: t

    case t.type do
      {:c, _} -> un(:conjugate, t)
      _ -> t
    end
  end

  @doc """
  Cholesky decomposition of a batch of Hermitian positive-definite
  matrices: the lower triangular `l` with `a = l·adjoint(l)`. A matrix that
  is not positive definite raises `ArgumentError` when the result is read.

      iex> Emily.Tensor.LinAlg.cholesky(Emily.Tensor.tensor([[20.0, 17.6], [17.6, 16.0]]))
      #Emily.Tensor<
        f32[2][2]
        [
          [4.472136, 0.0],
          [3.9354796, 0.71554184]
        ]
      >
  """
  def cholesky(t) do
    {t, out} = float_input(t)

    unless square?(t.shape) do
      raise ArgumentError,
            "tensor must be a square matrix or a batch of square matrices, got shape: #{inspect(t.shape)}"
    end

    finish(Native.cholesky(ref!(t)), out)
  end

  @doc """
  Solves `op(a)·x = b` (`left_side: true`) or `x·op(a) = b` for a batch of
  triangular matrices `a`. `b` is a batch of matrices or of vectors with
  `a`'s batch axes.

  Options: `:lower` (default `true`: the lower triangle of `a` is read),
  `:left_side` (default `true`), `:transform_a` (`:none` or `:transpose`).
  A zero on the diagonal raises `ArgumentError` ("can't solve for singular
  matrix") when the result is read.

      iex> a = Emily.Tensor.tensor([[3, 0, 0, 0], [2, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]])
      iex> Emily.Tensor.LinAlg.triangular_solve(a, Emily.Tensor.tensor([4, 2, 4, 2]))
      #Emily.Tensor<
        f32[4]
        [1.3333334, -0.66666675, 2.6666665, -1.3333331]
      >
  """
  def triangular_solve(a, b, opts \\ []) do
    opts = Core.options!(opts, lower: true, left_side: true, transform_a: :none)

    transpose =
      case opts[:transform_a] do
        :none ->
          false

        :transpose ->
          true

        :conjugate ->
          raise ArgumentError, "complex numbers not supported yet"

        other ->
          raise ArgumentError,
                "invalid value for :transform_a option, expected :none, :transpose, or :conjugate, " <>
                  "got: #{inspect(other)}"
      end

    a = Core.to_tensor(a)
    b = Core.to_tensor(b)

    unless square?(a.shape) do
      raise ArgumentError,
            "triangular_solve/3 expected a square matrix or a batch of square matrices, " <>
              "got tensor with shape: #{inspect(a.shape)}"
    end

    rhs_ok!(a.shape, b.shape, opts[:left_side], fn ->
      raise ArgumentError, "incompatible dimensions for a and b on triangular solve"
    end)

    out = a.type |> Type.merge(b.type) |> Type.to_floating()
    ct = compute_type(out)

    Native.triangular_solve(
      ref!(Core.cast(a, ct)),
      ref!(Core.cast(b, ct)),
      opts[:left_side] == true,
      opts[:lower] == true,
      transpose
    )
    |> finish(out)
  end

  # b is [..., n] or [..., n, k] (left) / [..., k, n] (right) with a's batch axes.
  defp rhs_ok!(a_shape, b_shape, left?, fail) do
    [n | rest] = a_shape |> Tuple.to_list() |> Enum.reverse()
    batch = rest |> tl() |> Enum.reverse()
    b = Tuple.to_list(b_shape)

    ok =
      cond do
        length(b) == length(batch) + 1 ->
          b == batch ++ [n]

        length(b) == length(batch) + 2 and left? ->
          Enum.take(b, length(batch) + 1) == batch ++ [n]

        length(b) == length(batch) + 2 ->
          Enum.take(b, length(batch)) == batch and List.last(b) == n

        true ->
          false
      end

    unless ok, do: fail.()
    :ok
  end

  @doc """
  Solves `a·x = b` for a batch of square matrices `a`; `b` has shape
  `{..., n, m}` or `{..., n}` and `x` has `b`'s shape. A singular matrix
  raises `ArgumentError` when the result is read.

      iex> a = Emily.Tensor.tensor([[1, 3, 2, 1], [2, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]])
      iex> Emily.Tensor.LinAlg.solve(a, Emily.Tensor.tensor([-3, 0, 4, -2])) |> Emily.Tensor.round()
      #Emily.Tensor<
        f32[4]
        [1.0, -2.0, 3.0, -4.0]
      >
  """
  def solve(a, b) do
    a = Core.to_tensor(a)
    b = Core.to_tensor(b)

    unless square?(a.shape) do
      raise ArgumentError,
            "`a` tensor has incompatible dimensions, expected a square matrix or a batch of " <>
              "square matrices, got: #{inspect(a.shape)}"
    end

    rhs_ok!(a.shape, b.shape, true, fn ->
      r = tuple_size(a.shape)
      n = elem(a.shape, r - 1)
      batch = a.shape |> Tuple.to_list() |> Enum.take(r - 2)

      raise ArgumentError,
            "`b` tensor has incompatible dimensions, expected #{inspect(List.to_tuple(batch ++ [n, n]))} " <>
              "or #{inspect(List.to_tuple(batch ++ [n]))}, got: #{inspect(b.shape)}"
    end)

    out = a.type |> Type.merge(b.type) |> Type.to_floating()
    ct = compute_type(out)
    finish(Native.solve(ref!(Core.cast(a, ct)), ref!(Core.cast(b, ct))), out)
  end

  @doc """
  Inverts a batch of square matrices. A singular matrix gives NaNs.

      iex> a = Emily.Tensor.tensor([[1, 2, 1, 1], [0, 1, 0, 1], [0, 0, 1, 1], [0, 0, 0, 1]])
      iex> Emily.Tensor.LinAlg.invert(a)
      #Emily.Tensor<
        f32[4][4]
        [
          [1.0, -2.0, -1.0, 2.0],
          [0.0, 1.0, 0.0, -1.0],
          [0.0, 0.0, 1.0, -1.0],
          [0.0, 0.0, 0.0, 1.0]
        ]
      >
  """
  def invert(t) do
    {t, out} = float_input(t)

    unless square?(t.shape) do
      raise ArgumentError,
            "invert/1 expects a square matrix or a batch of square matrices, got tensor with shape: " <>
              inspect(t.shape)
    end

    finish(Native.invert(ref!(t)), out)
  end

  @doc """
  QR decomposition of a batch of `{..., m, n}` matrices: `{q, r}` with
  `q` orthonormal (unitary) and `r` upper triangular.

  Options: `:mode` — `:reduced` (default: `q` `{..., m, k}`, `r`
  `{..., k, n}`, `k = min(m, n)`) or `:complete` (`q` `{..., m, m}`, `r`
  `{..., m, n}`); `:eps` (ignored).

      iex> t = Emily.Tensor.tensor([[3, 2, 1], [0, 1, 1], [0, 0, 1], [0, 0, 1]], type: :f32)
      iex> {q, r} = Emily.Tensor.LinAlg.qr(t, mode: :reduced)
      iex> q
      #Emily.Tensor<
        f32[4][3]
        [
          [1.0, 0.0, 0.0],
          [0.0, 1.0, 0.0],
          [0.0, 0.0, 0.7071068],
          [0.0, 0.0, 0.70710677]
        ]
      >
      iex> r
      #Emily.Tensor<
        f32[3][3]
        [
          [3.0, 2.0, 1.0],
          [0.0, 1.0, 1.0],
          [0.0, 0.0, 1.4142135]
        ]
      >
  """
  def qr(t, opts \\ []) do
    opts = Core.options!(opts, mode: :reduced, eps: 1.0e-10)
    {t, out} = float_input(t)

    unless opts[:mode] in [:reduced, :complete] do
      raise ArgumentError,
            "invalid :mode received. Expected one of [:reduced, :complete], received: #{inspect(opts[:mode])}"
    end

    if tuple_size(t.shape) < 2 do
      raise ArgumentError,
            "tensor must have at least rank 2, got rank #{tuple_size(t.shape)} with shape #{inspect(t.shape)}"
    end

    {q, r} = Native.qr(ref!(t), opts[:mode] == :complete)
    {finish(q, out), finish(r, out)}
  end

  @doc """
  Eigenvalues and eigenvectors of a batch of Hermitian matrices:
  `{eigenvals, eigenvecs}` with the eigenvectors as columns. The
  eigenvalues are in ascending order (LAPACK's; Nx's binary backend
  returns them in the order its Jacobi iteration finds them). Options
  `:max_iter` and `:eps` are accepted and ignored.

      iex> {eigenvals, eigenvecs} = Emily.Tensor.LinAlg.eigh(Emily.Tensor.tensor([[1, 0], [0, 2]]))
      iex> Emily.Tensor.round(eigenvals)
      #Emily.Tensor<
        f32[2]
        [1.0, 2.0]
      >
      iex> eigenvecs
      #Emily.Tensor<
        f32[2][2]
        [
          [1.0, 0.0],
          [0.0, 1.0]
        ]
      >
  """
  def eigh(t, opts \\ []) do
    Core.options!(opts, max_iter: 1_000, eps: 1.0e-4)
    {t, out} = float_input(t)

    unless square?(t.shape) do
      raise ArgumentError,
            "tensor must be a square matrix or a batch of square matrices, got shape: #{inspect(t.shape)}"
    end

    {w, v} = Native.eigh(ref!(t))
    {finish(w, out), finish(v, out)}
  end

  @doc """
  Singular value decomposition of a batch of `{..., m, n}` matrices:
  `{u, s, vt}` with `s` in descending order.

  Options: `:full_matrices?` (default `true`: `u` `{..., m, m}` and `vt`
  `{..., n, n}`; else `{..., m, k}` and `{..., k, n}`), `:max_iter`
  (ignored). Complex inputs raise, as in Nx.

      iex> {u, s, vt} = Emily.Tensor.LinAlg.svd(Emily.Tensor.tensor([[2, 0, 0], [0, 3, 0], [0, 0, -1], [0, 0, 0]]))
      iex> s
      #Emily.Tensor<
        f32[3]
        [3.0, 2.0, 1.0]
      >
      iex> {u.shape, vt.shape}
      {{4, 4}, {3, 3}}
  """
  def svd(t, opts \\ []) do
    opts = Core.options!(opts, max_iter: 100, full_matrices?: true)
    t = Core.to_tensor(t)

    if Type.complex?(t.type) do
      raise ArgumentError, "Nx.LinAlg.svd/2 is not yet implemented for complex inputs"
    end

    {t, out} = float_input(t)

    if tuple_size(t.shape) < 2 do
      raise ArgumentError,
            "tensor must have at least rank 2, got rank #{tuple_size(t.shape)} with shape #{inspect(t.shape)}"
    end

    {u, s, vt} = Native.svd(ref!(t), opts[:full_matrices?] == true)
    {finish(u, out), finish(s, out), finish(vt, out)}
  end

  @doc """
  The `a = p·l·u` decomposition of a batch of square matrices with partial
  pivoting: `p` is a permutation matrix of `a`'s type, `l` unit lower
  triangular and `u` upper triangular (both floating). `:eps` is ignored.

      iex> {p, l, u} = Emily.Tensor.LinAlg.lu(Emily.Tensor.tensor([[1, 0, 1], [-1, 0, -1], [1, 1, 1]]))
      iex> p
      #Emily.Tensor<
        s32[3][3]
        [
          [1, 0, 0],
          [0, 0, 1],
          [0, 1, 0]
        ]
      >
      iex> l
      #Emily.Tensor<
        f32[3][3]
        [
          [1.0, 0.0, 0.0],
          [1.0, 1.0, 0.0],
          [-1.0, 0.0, 1.0]
        ]
      >
      iex> u
      #Emily.Tensor<
        f32[3][3]
        [
          [1.0, 0.0, 1.0],
          [0.0, 1.0, 0.0],
          [0.0, 0.0, 0.0]
        ]
      >
  """
  def lu(t, opts \\ []) do
    Core.options!(opts, eps: 1.0e-10)
    t = Core.to_tensor(t)
    in_type = t.type
    {t, out} = float_input(t)

    unless square?(t.shape) do
      raise ArgumentError,
            "tensor must be a square matrix or a batch of square matrices, got shape: #{inspect(t.shape)}"
    end

    {p, l, u} = Native.lu(ref!(t))
    {finish(p, in_type), finish(l, out), finish(u, out)}
  end

  @doc """
  The determinant of a batch of square matrices (0 for singular ones).

      iex> Emily.Tensor.LinAlg.determinant(Emily.Tensor.tensor([[1, 2], [3, 4]]))
      #Emily.Tensor<
        f32
        -2.0
      >
  """
  def determinant(t) do
    {t, out} = float_input(t)
    # LU in double precision: f32 results then round exactly (Nx uses closed
    # forms for 2x2 and 3x3 that give exact integers).
    t = Core.cast(t, if(Type.complex?(t.type), do: {:c, 128}, else: {:f, 64}))

    unless square?(t.shape) do
      shape = t.shape |> Tuple.to_list() |> Enum.take(-2)

      raise ArgumentError,
            "determinant/1 expects a square tensor, got tensor with shape: #{inspect(shape)}"
    end

    finish(Native.determinant(ref!(t)), out)
  end

  @doc """
  The batch of square matrices raised to the integer `power` by repeated
  matrix products (a negative power inverts first; power 0 gives the
  identity as an s32 `eye`, as Nx).

      iex> Emily.Tensor.LinAlg.matrix_power(Emily.Tensor.tensor([[1, 2], [3, 4]]), 6)
      #Emily.Tensor<
        s32[2][2]
        [
          [5743, 8370],
          [12555, 18298]
        ]
      >
  """
  def matrix_power(t, power) when is_integer(power) do
    t = Core.to_tensor(t)

    unless square?(t.shape) do
      raise ArgumentError,
            "matrix_power/2 expects a square matrix or a batch of square matrices, got tensor with shape: " <>
              inspect(t.shape)
    end

    cond do
      power < 0 -> matrix_power(invert(t), -power)
      power == 0 -> wrap(Native.eye(Tuple.to_list(t.shape), 0, {:s, 32}))
      true -> power_by_squaring(t, power)
    end
  end

  defp power_by_squaring(t, 1), do: t

  defp power_by_squaring(t, p) do
    half = power_by_squaring(matmul(t, t), div(p, 2))
    if rem(p, 2) == 1, do: matmul(half, t), else: half
  end

  @doc """
  The Moore–Penrose pseudo-inverse (through the SVD; singular values below
  `:eps`, default `1.0e-10`, count as zero). Scalars give `1 / t` and
  vectors `adjoint(t) / norm(t)²`.

      iex> Emily.Tensor.LinAlg.pinv(Emily.Tensor.tensor([0, 1, 2]))
      #Emily.Tensor<
        f32[3]
        [0.0, 0.2, 0.4]
      >
  """
  def pinv(t, opts \\ []) do
    opts = Core.options!(opts, eps: 1.0e-10)
    {t, out} = float_input(t)
    eps = opts[:eps]

    case tuple_size(t.shape) do
      0 ->
        zero = reduce(bin(:less_equal, un(:abs, t), eps), :all, nil, false)
        select(zero, Core.to_tensor(0, t.type), bin(:divide, 1, t)) |> finish(out)

      1 ->
        n = norm(t)
        n2 = bin(:multiply, n, n) |> Core.cast(t.type)
        safe = select(bin(:less_equal, n, eps), Core.to_tensor(1, t.type), n2)
        res = bin(:divide, adjoint(t), safe)
        select(bin(:less_equal, n, eps), Core.to_tensor(0, t.type), res) |> finish(out)

      _ ->
        {u, s, vt} = svd_any(t)
        small = bin(:less, un(:abs, s), eps)

        s_inv =
          select(
            small,
            Core.to_tensor(0, s.type),
            bin(:divide, 1, select(small, Core.to_tensor(1, s.type), s))
          )

        sut = bin(:multiply, new_axis_last(Core.cast(s_inv, t.type)), adjoint(u))
        matmul(adjoint(vt), sut) |> finish(out)
    end
  end

  # Reduced SVD for pinv (complex inputs are not supported by LAPACK's path here).
  defp svd_any(t) do
    raise_complex!(t, "pinv/2")
    {u, s, vt} = Native.svd(ref!(t), false)
    {wrap(u), wrap(s), wrap(vt)}
  end

  @doc """
  Vector and matrix norms, as `Nx.LinAlg.norm/2`.

  Options: `:ord` (`nil`: the 2-norm of vectors, the Frobenius norm of
  matrices; `:frobenius`, `:nuclear`, `:inf`, `:neg_inf`, or an integer),
  `:axes` and `:keep_axes` (for the reductions of the vector-style norms).
  The result is real (`to_real` of the input type).

      iex> Emily.Tensor.LinAlg.norm(Emily.Tensor.tensor([3, 4]))
      #Emily.Tensor<
        f32
        5.0
      >
      iex> Emily.Tensor.LinAlg.norm(Emily.Tensor.tensor([[1, 0, 0], [0, -4, 0], [0, 0, 9]]), ord: :nuclear)
      #Emily.Tensor<
        f32
        14.0
      >
  """
  def norm(t, opts \\ []) do
    opts = Core.options!(opts, ord: nil, axes: nil, keep_axes: false)
    t = Core.to_tensor(t)
    rank = tuple_size(t.shape)

    unless rank in [1, 2] do
      raise ArgumentError, "expected 1-D or 2-D tensor, got tensor with shape #{inspect(t.shape)}"
    end

    axes = if opts[:axes], do: Core.axes!(opts[:axes], rank)
    keep = opts[:keep_axes] == true
    out = Type.to_real(t.type)
    abs_t = t |> un_abs() |> Core.cast(compute_type(out))

    res =
      case {opts[:ord], rank} do
        {nil, _} ->
          norm_p(abs_t, 2, axes, keep)

        {:frobenius, 1} ->
          raise ArgumentError, "expected a 2-D tensor for ord: :frobenius, got a 1-D tensor"

        {:frobenius, 2} ->
          norm_p(abs_t, 2, axes, keep)

        {:nuclear, 2} ->
          t |> singular_values() |> reduce(:sum, nil, false)

        {:nuclear, _} ->
          raise ArgumentError, "nuclear norm not supported for rank != 2"

        {:inf, 1} ->
          reduce(abs_t, :max, axes, keep)

        {:neg_inf, 1} ->
          reduce(abs_t, :min, axes, keep)

        {:inf, 2} ->
          abs_t |> reduce(:sum, [1], false) |> reduce(:max, axes, keep)

        {:neg_inf, 2} ->
          abs_t |> reduce(:sum, [1], false) |> reduce(:min, axes, keep)

        {0, 1} ->
          bin(:not_equal, abs_t, 0) |> Core.cast(abs_t.type) |> reduce(:sum, axes, keep)

        {1, 2} ->
          abs_t |> reduce(:sum, [0], false) |> reduce(:max, axes, keep)

        {-1, 2} ->
          abs_t |> reduce(:sum, [0], false) |> reduce(:min, axes, keep)

        {-2, 2} ->
          t |> singular_values() |> reduce(:min, axes, keep)

        {2, 2} ->
          norm_p(abs_t, 2, axes, keep)

        {ord, 2} when is_integer(ord) ->
          raise ArgumentError, "invalid :ord for 2-D tensor, got: #{inspect(ord)}"

        {ord, 1} when is_integer(ord) ->
          norm_p(abs_t, ord, axes, keep)

        {ord, _} ->
          raise ArgumentError, "unknown ord #{inspect(ord)}"
      end

    finish(res, out)
  end

  defp un_abs(%Emily.Tensor{type: {:u, _}} = t), do: t
  defp un_abs(t), do: un(:abs, t)

  # (sum |x|^p)^(1/p), scaled by max |x| for stability.
  defp norm_p(abs_t, p, axes, keep) do
    coef = reduce(abs_t, :max, axes, true)
    coef = select(bin(:greater, coef, 0), coef, Core.to_tensor(1, coef.type))
    scaled = bin(:divide, abs_t, coef)
    powered = if p == 2, do: bin(:multiply, scaled, scaled), else: bin(:pow, scaled, p * 1.0)
    sum = reduce(powered, :sum, axes, keep)
    root = if p == 2, do: un(:sqrt, sum), else: bin(:pow, sum, 1.0 / p)
    coef = if keep, do: coef, else: reduce(coef, :max, axes, false)
    bin(:multiply, root, coef)
  end

  defp singular_values(t) do
    raise_complex!(t, "norm/2 with ord: :nuclear or -2")
    {t, _} = float_input(t)
    {_u, s, _vt} = Native.svd(ref!(t), false)
    wrap(s)
  end

  @doc """
  The rank of a matrix: the number of singular values above
  `eps · max(m, n) · max(s)` (`:eps`, default `1.0e-7`). The count is
  `u32` (Emily's aggregate type for unsigned sums).

      iex> Emily.Tensor.LinAlg.matrix_rank(Emily.Tensor.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [1, 2, 3, 4]]))
      #Emily.Tensor<
        u32
        2
      >
  """
  def matrix_rank(a, opts \\ []) do
    opts = Core.options!(opts, eps: 1.0e-7)
    a = Core.to_tensor(a)
    raise_complex!(a, "matrix_rank/2")

    unless tuple_size(a.shape) == 2 do
      raise ArgumentError,
            "tensor must have rank 2, got rank #{tuple_size(a.shape)} with shape #{inspect(a.shape)}"
    end

    s = singular_values(a)
    {m, n} = a.shape
    tol = bin(:multiply, reduce(s, :max, nil, false), opts[:eps] * max(m, n))
    bin(:greater, s, tol) |> Core.cast({:u, 32}) |> reduce(:sum, nil, false)
  end

  @doc """
  The least-squares solution of `a·x = b` for a matrix `a` and a vector
  `b` (`solve/2` when `a` is square, else `pinv(a, eps: eps)·b`).

  ## Options

    * `:eps` - singular values of `a` below it count as zero in the
      pseudo-inverse (default `1.0e-15`; used when `a` is not square)

  The minimum-norm solution of `x + 2y + 3z = 1, 4x + 5y + 6z = 2` is
  `[-1, 2, 5] / 18`; its last digits in f32 depend on the LAPACK kernels
  the CPU gets, so it is shown scaled and rounded:

      iex> x = Emily.Tensor.LinAlg.least_squares(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]), Emily.Tensor.tensor([1, 2]))
      iex> Emily.Tensor.multiply(x, 18) |> Emily.Tensor.round()
      #Emily.Tensor<
        f32[3]
        [-1.0, 2.0, 5.0]
      >

      iex> a = Emily.Tensor.tensor([[1.0, 0.0], [0.0, 1.0e-6], [0.0, 0.0]])
      iex> Emily.Tensor.LinAlg.least_squares(a, Emily.Tensor.tensor([1.0, 1.0, 0.0]), eps: 1.0e-3)
      #Emily.Tensor<
        f32[2]
        [1.0, 0.0]
      >
  """
  def least_squares(a, b, opts \\ []) do
    opts = Core.options!(opts, eps: 1.0e-15)
    eps = opts[:eps]

    unless is_number(eps) and eps >= 0 do
      raise ArgumentError, "expected :eps to be a non-negative number, got: #{inspect(eps)}"
    end

    a = Core.to_tensor(a)
    b = Core.to_tensor(b)
    raise_complex!(a, "least_squares/2")
    raise_complex!(b, "least_squares/2")

    unless tuple_size(a.shape) == 2 do
      raise ArgumentError,
            "tensor of 1st argument must have rank 2, got rank #{tuple_size(a.shape)} with shape #{inspect(a.shape)}"
    end

    unless tuple_size(b.shape) == 1 do
      raise ArgumentError,
            "tensor of 2nd argument must have rank 1, got rank #{tuple_size(b.shape)} with shape #{inspect(b.shape)}"
    end

    {m, n} = a.shape

    if m != elem(b.shape, 0) do
      raise ArgumentError,
            "the number of rows of the matrix as the 1st argument and the number of columns of the " <>
              "vector as the 2nd argument must be the same, got 1st argument shape #{inspect(a.shape)} " <>
              "and 2nd argument shape #{inspect(b.shape)}"
    end

    if m == n do
      solve(a, b)
    else
      out = a.type |> Type.merge(b.type) |> Type.to_floating()
      p = pinv(a, eps: eps)
      b = Core.cast(b, p.type)
      matmul(p, new_axis_last(b)) |> then(&wrap(Native.reshape(ref!(&1), [n]))) |> finish(out)
    end
  end
end
