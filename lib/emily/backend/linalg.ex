defmodule Emily.Backend.LinAlg do
  @moduledoc false
  # Nx.LinAlg on the engine's LAPACK-backed kernels: triangular_solve (a
  # callback) and the linalg blocks. Half-precision inputs are computed in
  # f32 (LAPACK has no f16) and converted to the output type Nx gives.
  # Results are normalised to the conventions Nx's own composition has, so
  # the same call gives the same factors on either backend (see qr/3).

  alias Emily.Backend.Util
  alias Emily.Native

  def triangular_solve(out, a, b, opts) do
    transpose =
      case opts[:transform_a] do
        :none -> false
        :transpose -> true
        # Nx's :conjugate solves conj(a)·x = b (no transpose).
        :conjugate -> false
      end

    # Substitution in f32 loses a few ulps over n steps; computed in f64 the
    # f32 result is correctly rounded for well-conditioned systems (the
    # solve is O(n^2), so the wider type costs little).
    [a_ref, b_ref] = refs_in(%{out | type: widen(out.type)}, [a, b])
    a_ref = if opts[:transform_a] == :conjugate, do: conjugate(a_ref), else: a_ref
    ref = Native.triangular_solve(a_ref, b_ref, opts[:left_side], opts[:lower], transpose)
    Util.wrap(out, ref, [a, b])
  end

  def cholesky(out, tensor) do
    [ref] = refs_in(out, [tensor])
    Util.wrap(out, Native.cholesky(ref), [tensor])
  end

  def solve(out, a, b) do
    [a_ref, b_ref] = refs_in(out, [a, b])
    Util.wrap(out, Native.solve(a_ref, b_ref), [a, b])
  end

  @doc """
  QR. LAPACK's Householder reflections make `r`'s diagonal `-sign(x)·|x|`;
  Nx's make it positive, except where a column has nothing below the
  diagonal to reflect (then it keeps its sign). Rows of `r` (and columns of
  `q`) are flipped accordingly: row i is made non-negative when the
  input's column i has a nonzero below the diagonal. This is exact unless
  earlier reflections zero that part out, which needs a matrix
  constructed for it.
  """
  def qr({q_out, r_out}, tensor, mode) do
    [ref] = refs_in(q_out, [tensor])
    {q, r} = Native.qr(ref, mode == :complete)
    {q, r} = normalize_qr_signs(q, r, ref, tensor.shape)
    {Util.wrap(q_out, q, [tensor]), Util.wrap(r_out, r, [tensor])}
  end

  defp normalize_qr_signs(q, r, a, shape) do
    rank = tuple_size(shape)
    [m, n] = shape |> Util.dims() |> Enum.take(-2)
    k = min(m, n)
    type = Native.dtype(r)
    batch = shape |> Util.dims() |> Enum.take(rank - 2)

    # Whether column j (< k) of a has a nonzero strictly below row j.
    below = Native.less(Native.iota([m, n], 1, {:s, 32}), Native.iota([m, n], 0, {:s, 32}))
    nonzero_below = Native.logical_and(below, Native.not_equal(a, Native.scalar_s64(0, type)))
    reflected = Native.any(nonzero_below, [rank - 2], false)
    reflected = Native.slice(reflected, List.duplicate(0, rank - 1), batch ++ [k], List.duplicate(1, rank - 1))

    diag =
      r
      |> Native.slice(List.duplicate(0, rank), batch ++ [k, n], List.duplicate(1, rank))
      |> Native.multiply(Native.eye(batch ++ [k, n], 0, type))
      |> Native.sum([rank - 1], false)

    negative = Native.less(Native.real(diag), Native.scalar_s64(0, real_type(type)))
    flip = Native.logical_and(reflected, negative)
    one = Native.scalar_s64(1, type)
    signs = Native.select(flip, Native.negate(one), one)

    # q's columns beyond k (complete mode) and r's rows beyond k keep their sign.
    q_cols = Native.shape(q) |> List.last()
    r_rows = Native.shape(r) |> Enum.at(rank - 2)
    q_signs = pad_ones(signs, rank - 1, q_cols - k, type)
    r_signs = pad_ones(signs, rank - 1, r_rows - k, type)

    q = Native.multiply(q, Native.expand_dims(q_signs, rank - 2))
    r = Native.multiply(r, Native.expand_dims(r_signs, rank - 1))
    {q, r}
  end

  defp pad_ones(signs, _rank, 0, _type), do: signs

  defp pad_ones(signs, rank, extra, type) do
    low = List.duplicate(0, rank)
    high = List.duplicate(0, rank - 1) ++ [extra]
    Native.pad(signs, Native.scalar_s64(1, type), low, high, List.duplicate(0, rank))
  end

  defp widen({:f, 32}), do: {:f, 64}
  defp widen({:c, 64}), do: {:c, 128}
  defp widen(type), do: type

  defp real_type({:c, 64}), do: {:f, 32}
  defp real_type({:c, 128}), do: {:f, 64}
  defp real_type(type), do: type

  @doc """
  eigh. LAPACK returns the eigenvalues ascending; Nx orders them by
  decreasing magnitude (a stable sort, so LAPACK's order breaks ties), and
  the eigenvector columns with them.
  """
  def eigh({w_out, v_out}, tensor) do
    [ref] = refs_in(w_out, [tensor])
    {w, v} = Native.eigh(ref)
    rank = tuple_size(tensor.shape)
    order = Native.argsort(Native.abs(w), rank - 2, true, {:s, 64})
    w = Emily.take_along_axis(w, order, rank - 2)
    # The same permutation of the columns of v, for every row.
    v_order = Native.broadcast_to(Native.expand_dims(order, rank - 2), Native.shape(v))
    v = Emily.take_along_axis(v, v_order, rank - 1)
    # Each eigenvector's sign is arbitrary: its largest-magnitude entry is
    # made positive (Nx's choice on its examples, and deterministic).
    signs = largest_positive_signs(Native.transpose(v, swap_last(rank)), rank)
    v = positive_zero(Native.multiply(v, Native.transpose(signs, swap_last(rank))))
    {Util.wrap(w_out, w, [tensor]), Util.wrap(v_out, v, [tensor])}
  end

  @doc """
  SVD. The signs of singular vector pairs are arbitrary; they are fixed so
  that the largest-magnitude entry of each row of `vt` is positive (each
  flip negates a row of `vt` and the matching column of `u`), which gives
  Nx's factors for the diagonal and permutation matrices of its examples
  and a deterministic choice everywhere.
  """
  def svd({u_out, s_out, vt_out}, tensor, full_matrices?) do
    [ref] = refs_in(u_out, [tensor])
    {u, s, vt} = Native.svd(ref, full_matrices?)
    rank = tuple_size(tensor.shape)
    type = Native.dtype(vt)
    # One sign per row of vt, as a column; the same signs scale u's columns.
    signs = largest_positive_signs(vt, rank)
    vt = positive_zero(Native.multiply(vt, signs))
    u_signs = fit_signs(Native.squeeze(signs, [rank - 1]), Native.shape(u) |> List.last(), type)
    u = positive_zero(Native.multiply(u, Native.expand_dims(u_signs, rank - 2)))
    {Util.wrap(u_out, u, [tensor]), Util.wrap(s_out, s, [tensor]), Util.wrap(vt_out, vt, [tensor])}
  end

  # For each row of `m` (a `[..., 1]` column): -1 where the row's
  # largest-magnitude entry is negative, else 1.
  defp largest_positive_signs(m, rank) do
    type = Native.dtype(m)
    largest = Native.argmax(Native.abs(m), rank - 1, true, false, {:s, 64})
    pivot = Emily.take_along_axis(m, largest, rank - 1)
    one = Native.scalar_s64(1, type)
    Native.select(Native.less(pivot, Native.scalar_s64(0, type)), Native.negate(one), one)
  end

  defp swap_last(rank), do: Enum.to_list(0..(rank - 3)//1) ++ [rank - 1, rank - 2]

  # Flipping a sign turns zeros into -0.0; x + 0.0 makes them 0.0 again.
  defp positive_zero(ref), do: Native.add(ref, Native.scalar_f64(0.0, Native.dtype(ref)))

  # The first `n` signs (u may have fewer columns than vt has rows), or the
  # signs padded with ones (u may have more).
  defp fit_signs(signs, n, type) do
    dims = Native.shape(signs)
    rank = length(dims)
    k = List.last(dims)

    cond do
      n == k -> signs
      n < k -> Native.slice(signs, List.duplicate(0, rank), List.replace_at(dims, rank - 1, n), List.duplicate(1, rank))
      true -> pad_ones(signs, rank, n - k, type)
    end
  end

  defp conjugate(ref) do
    case Native.dtype(ref) do
      {:c, _} -> Native.conjugate(ref)
      _ -> ref
    end
  end

  def lu({p_out, l_out, u_out}, tensor) do
    [ref] = refs_in(l_out, [tensor])
    {p, l, u} = Native.lu(ref)
    {Util.wrap(p_out, p, [tensor]), Util.wrap(l_out, l, [tensor]), Util.wrap(u_out, u, [tensor])}
  end

  @doc """
  Determinant by LU in double precision: f32 results then round to the
  closed forms Nx's composition gives for small integer matrices.
  """
  def determinant(out, tensor) do
    compute = if match?({:c, _}, out.type), do: {:c, 128}, else: {:f, 64}
    det = Native.determinant(Util.ref_as(tensor, compute))
    # A singular matrix's LU product can be -0.0; Nx's answer is 0.0
    # (x + 0.0 maps -0.0 to 0.0 and nothing else changes).
    det = if compute == {:f, 64}, do: Native.add(det, Native.scalar_f64(0.0, compute)), else: det
    Util.wrap(out, det, [tensor])
  end

  # The inputs converted to the type LAPACK computes the output type in.
  defp refs_in(%{type: type}, tensors) do
    compute =
      case type do
        {kind, 16} when kind in [:f, :bf] -> {:f, 32}
        other -> other
      end

    tensors |> Util.refs() |> Enum.map(&Util.cast(&1, compute))
  end
end
