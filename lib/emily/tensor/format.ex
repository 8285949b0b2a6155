defmodule Emily.Tensor.Format do
  @moduledoc """
  Number formatting for printed tensors, as Nx prints them.

    * integers: plain decimal;
    * f64: `Float.to_string/1` (shortest round-trip digits in f64);
    * f32, f16 and bf16: the shortest decimal digits that round back to
      the same value *in that storage type* (exact ties between two
      shortest candidates go to the even digit), laid out by Nx's rules:
      fixed notation unless scientific is shorter, and a single digit in
      scientific notation gets no `.0` (`1e3`, `9.77e-4`);
    * non-finite values print `NaN`, `Inf` and `-Inf`;
    * complex values print `re` then `im` with a sign, then `i`
      (`1.0+2.0i`, `0.0-0.0i`), each part formatted as the real type.

  The digits are computed with exact integer arithmetic on the value's
  significand and binary exponent, so no double rounding takes place.
  """

  import Bitwise

  # {mantissa bits, minimum normal binary exponent} per storage type.
  @params %{{:f, 16} => {10, -14}, {:bf, 16} => {7, -126}, {:f, 32} => {23, -126}}

  @doc """
  Formats one element as Nx prints it. `value` is an integer, a float,
  `:nan`, `:infinity`, `:neg_infinity` or an `Emily.Complex`; `type` is
  the tensor's type.

      iex> Emily.Tensor.Format.number(1000.0, {:f, 32})
      "1e3"
      iex> Emily.Tensor.Format.number(1000.0, {:f, 64})
      "1.0e3"
      iex> Emily.Tensor.Format.number(65504.0, {:f, 16})
      "6.55e4"
      iex> Emily.Tensor.Format.number(Emily.Complex.new(1.0, -2.0), {:c, 64})
      "1.0-2.0i"
  """
  def number(value, type)

  def number(%Emily.Complex{re: re, im: im}, {:c, bits}) do
    part = {:f, div(bits, 2)}
    im = number(im, part)
    sign = if String.starts_with?(im, "-"), do: "", else: "+"
    number(re, part) <> sign <> im <> "i"
  end

  def number(:nan, _type), do: "NaN"
  def number(:infinity, _type), do: "Inf"
  def number(:neg_infinity, _type), do: "-Inf"
  def number(n, _type) when is_integer(n), do: Integer.to_string(n)
  def number(x, {:f, 64}) when is_float(x), do: Float.to_string(x)

  def number(x, type) when is_float(x) do
    case shortest(x, type) do
      {sign, 0, _} -> sign <> "0.0"
      {sign, digits, exp} -> sign <> layout(Integer.to_string(digits), exp)
    end
  end

  @doc """
  The shortest decimal that rounds back to `x` in storage type `type`
  (f16, bf16 or f32; `x` must be exactly representable in it), as
  `{sign, digits, exponent}` with `abs(x) ≈ digits × 10^exponent` and no
  trailing zeros in `digits` (`{"", 0, 0}` for zero).

      iex> Emily.Tensor.Format.shortest(0.10000000149011612, {:f, 32})
      {"", 1, -1}
  """
  def shortest(x, type) when is_float(x) do
    {mb, emin} = Map.fetch!(@params, type)
    <<s::1, e::11, m::52>> = <<x::float-64>>
    sign = if s == 1, do: "-", else: ""

    if e == 0 and m == 0 do
      {sign, 0, 0}
    else
      # All f32/f16/bf16 values, subnormals included, are normal f64s.
      k = e - 1023
      e2 = max(k, emin) - mb
      shift = e - 1075 - e2
      sig = bor(1 <<< 52, m)

      mant =
        if shift >= 0,
          do: sig <<< shift,
          else: exact_shift_right(sig, -shift, x, type)

      # The rounding interval [lo, hi] in units of 2^(e2 - 2); the bounds
      # belong to it when the significand is even (ties to even).
      lower_gap = if mant == 1 <<< mb and k > emin, do: 1, else: 2
      lo = 4 * mant - lower_gap
      hi = 4 * mant + 2
      inclusive = rem(mant, 2) == 0

      {digits, exp} = search(mant, e2, lo, hi, inclusive)
      {digits, exp} = strip_zeros(digits, exp)
      {sign, digits, exp}
    end
  end

  defp exact_shift_right(sig, n, x, type) do
    if (sig &&& (1 <<< n) - 1) != 0 do
      raise ArgumentError, "#{inspect(x)} is not exactly representable in #{inspect(type)}"
    end

    sig >>> n
  end

  # Tries 1, 2, 3, ... significant digits; at each length the two
  # candidates around the value (floor and ceiling) are checked against the
  # rounding interval.
  defp search(mant, e2, lo, hi, inclusive) do
    e10 = decimal_exponent(mant, e2)
    search(mant, e2, lo, hi, inclusive, e10, 1)
  end

  defp search(mant, e2, lo, hi, inclusive, e10, n) do
    p = e10 - n + 1
    {num, den} = scaled(mant, e2, p)
    d = div(num, den)
    r = rem(num, den)

    if r == 0 do
      {d, p}
    else
      fits_d = within?(d, p, e2, lo, hi, inclusive)
      fits_u = within?(d + 1, p, e2, lo, hi, inclusive)

      cond do
        fits_d and fits_u ->
          cond do
            2 * r < den -> {d, p}
            2 * r > den -> {d + 1, p}
            rem(d, 2) == 0 -> {d, p}
            true -> {d + 1, p}
          end

        fits_d ->
          {d, p}

        fits_u ->
          {d + 1, p}

        true ->
          search(mant, e2, lo, hi, inclusive, e10, n + 1)
      end
    end
  end

  # mant × 2^e2 / 10^p as an integer fraction {num, den}.
  defp scaled(mant, e2, p) do
    num = mant * pow2(max(e2, 0)) * pow10(max(-p, 0))
    den = pow2(max(-e2, 0)) * pow10(max(p, 0))
    {num, den}
  end

  # Whether d × 10^p lies in [lo, hi] × 2^(e2 - 2).
  defp within?(d, p, e2, lo, hi, inclusive) do
    s = e2 - 2
    scale_l = pow10(max(p, 0)) * pow2(max(-s, 0))
    scale_r = pow2(max(s, 0)) * pow10(max(-p, 0))
    c = d * scale_l
    l = lo * scale_r
    h = hi * scale_r

    if inclusive, do: c >= l and c <= h, else: c > l and c < h
  end

  # floor(log10(mant × 2^e2)), exactly.
  defp decimal_exponent(mant, e2) do
    guess = floor(:math.log10(mant) + e2 * :math.log10(2))
    fix_exponent(mant, e2, guess)
  end

  defp fix_exponent(mant, e2, k) do
    cond do
      compare_pow10(mant, e2, k) == :lt -> fix_exponent(mant, e2, k - 1)
      compare_pow10(mant, e2, k + 1) != :lt -> fix_exponent(mant, e2, k + 1)
      true -> k
    end
  end

  defp compare_pow10(mant, e2, k) do
    {num, den} = scaled(mant, e2, k)

    cond do
      num < den -> :lt
      num == den -> :eq
      true -> :gt
    end
  end

  defp strip_zeros(0, exp), do: {0, exp}
  defp strip_zeros(d, exp) when rem(d, 10) == 0, do: strip_zeros(div(d, 10), exp + 1)
  defp strip_zeros(d, exp), do: {d, exp}

  defp pow2(n), do: 1 <<< n
  defp pow10(n), do: Integer.pow(10, n)

  @doc """
  Lays out positive digits `d` (no trailing zeros) and exponent `p`
  (value `d × 10^p`) by Nx's rules.

      iex> Emily.Tensor.Format.layout("125", -1)
      "12.5"
      iex> Emily.Tensor.Format.layout("1", -4)
      "1e-4"
  """
  def layout(ds, p) do
    l = byte_size(ds)
    e = p + l - 1
    c = byte_size(Integer.to_string(e)) + 2

    cond do
      p < 0 and e >= 0 ->
        {int, frac} = String.split_at(ds, l + p)
        int <> "." <> frac

      e < 0 ->
        if 2 - p - l <= c,
          do: "0." <> String.duplicate("0", -e - 1) <> ds,
          else: scientific(ds, e)

      true ->
        if c + if(l == 1, do: 1, else: 0) >= p + 2,
          do: ds <> String.duplicate("0", p) <> ".0",
          else: scientific(ds, e)
    end
  end

  defp scientific(<<d>>, e), do: <<d>> <> "e" <> Integer.to_string(e)

  defp scientific(<<d, rest::binary>>, e),
    do: <<d>> <> "." <> rest <> "e" <> Integer.to_string(e)
end
