defmodule Emily.Backend.LinAlg do
  @moduledoc false
  # Nx.LinAlg on the engine's LAPACK-backed kernels: triangular_solve (a
  # callback) and the linalg blocks. Half-precision inputs are computed in
  # f32 (LAPACK has no f16) and converted to the output type Nx gives.
  # Results follow the conventions Nx's own composition has, so the same
  # call gives the same factors on either backend (qr: the engine itself;
  # eigh, svd: below).

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
  QR. The engine gives Nx's sign (complex: phase) convention for `r`'s
  diagonal itself (linalg.c's `qr_unit`, from LAPACK's tau).
  """
  def qr({q_out, r_out}, tensor, mode) do
    [ref] = refs_in(q_out, [tensor])
    {q, r} = Native.qr(ref, mode == :complete)
    {Util.wrap(q_out, q, [tensor]), Util.wrap(r_out, r, [tensor])}
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
    # Each eigenvector's sign (phase, for complex) is arbitrary: its
    # largest-magnitude entry is made real and positive (Nx's choice on its
    # examples, and deterministic).
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
    # One sign per row of vt, as a column; the same signs scale u's columns
    # (Nx has no complex SVD: these are real signs).
    signs = largest_positive_signs(vt, rank)
    vt = positive_zero(Native.multiply(vt, signs))
    u_signs = fit_signs(Native.squeeze(signs, [rank - 1]), Native.shape(u) |> List.last(), type)
    u = positive_zero(Native.multiply(u, Native.expand_dims(u_signs, rank - 2)))
    {Util.wrap(u_out, u, [tensor]), Util.wrap(s_out, s, [tensor]), Util.wrap(vt_out, vt, [tensor])}
  end

  # For each row of `m` (a `[..., 1]` column): the unit factor that makes
  # the row's largest-magnitude entry real and positive.
  defp largest_positive_signs(m, rank) do
    largest = Native.argmax(Native.abs(m), rank - 1, true, false, {:s, 64})
    m |> Emily.take_along_axis(largest, rank - 1) |> unit_factor()
  end

  # -1 for a negative real, else 1; for a complex p, conj(p)/|p| (1 at 0):
  # complex tensors have no order, and their phase is what is arbitrary.
  defp unit_factor(pivot) do
    type = Native.dtype(pivot)
    one = Native.scalar_s64(1, type)

    case type do
      {:c, _} ->
        magnitude = Native.abs(pivot)
        zero = Native.equal(magnitude, Native.scalar_s64(0, Native.dtype(magnitude)))
        Native.select(zero, one, Native.divide(Native.conjugate(pivot), Util.cast(magnitude, type)))

      _ ->
        Native.select(Native.less(pivot, Native.scalar_s64(0, type)), Native.negate(one), one)
    end
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
