defmodule Emily.Tensor.Conv do
  @moduledoc """
  N-d convolution with Nx's `Nx.conv/3` API and semantics.

  The engine primitive (`include/emily_conv.h`) works on the
  `{batch, channels, spatial...}` layout with kernels
  `{out_channels, in_channels / feature_groups, spatial...}`; the
  `:input_permutation`, `:kernel_permutation` and `:output_permutation`
  options are transposes (views) around it. It runs as im2col + one BLAS
  GEMM per batch element and group (f16/bf16 through f32).
  """

  alias Emily.Native
  alias Emily.Tensor.{Core, Type}

  @doc """
  Computes an N-d convolution (a cross-correlation, as in Nx: the kernel
  is neither flipped nor conjugated) of `tensor` `{n, c, d...}` with
  `kernel` `{o, c / feature_group_size, k...}`.

  Options:

    * `:strides` — integer or one per spatial axis (default 1)
    * `:padding` — `:valid` (default), `:same` (`K - 1` zeros split as
      `{floor, ceil}` with `K` the dilated kernel size) or `[{lo, hi}]`
      per spatial axis
    * `:input_dilation`, `:kernel_dilation` — integer or list (default 1)
    * `:feature_group_size` — split channels into groups (default 1)
    * `:batch_group_size` — split the batch into groups (default 1)
    * `:input_permutation`, `:kernel_permutation` — axes permutation
      that brings the input (kernel) into the layout above
    * `:output_permutation` — the output is computed as
      `{n, o, spatial...}` and returned transposed so that axis
      `output_permutation[i]` of the result holds axis `i` (so the same
      permutation as the input's round-trips a channels-last layout)

  The output type is `to_floating` of the merged input and kernel types.

      iex> left = Emily.Tensor.iota({9}) |> Emily.Tensor.reshape({1, 1, 3, 3})
      iex> right = Emily.Tensor.iota({4}) |> Emily.Tensor.reshape({4, 1, 1, 1})
      iex> Emily.Tensor.conv(left, right, strides: [1, 1])
      #Emily.Tensor<
        f32[1][4][3][3]
        [
          [
            [
              [0.0, 0.0, 0.0],
              [0.0, 0.0, 0.0],
              [0.0, 0.0, 0.0]
            ],
            [
              [0.0, 1.0, 2.0],
              [3.0, 4.0, 5.0],
              [6.0, 7.0, 8.0]
            ],
            [
              [0.0, 2.0, 4.0],
              [6.0, 8.0, 10.0],
              [12.0, 14.0, 16.0]
            ],
            [
              [0.0, 3.0, 6.0],
              [9.0, 12.0, 15.0],
              [18.0, 21.0, 24.0]
            ]
          ]
        ]
      >
  """
  def conv(tensor, kernel, opts \\ []) do
    opts =
      Core.options!(opts,
        strides: 1,
        padding: :valid,
        input_dilation: 1,
        kernel_dilation: 1,
        feature_group_size: 1,
        batch_group_size: 1,
        input_permutation: nil,
        kernel_permutation: nil,
        output_permutation: nil
      )

    t = Core.to_tensor(tensor)
    k = Core.to_tensor(kernel)

    for {x, what} <- [{t, "input"}, {k, "kernel"}], tuple_size(x.shape) < 3 do
      raise ArgumentError,
            "#{what} shape in conv requires at least rank 3," <>
              " shape #{inspect(x.shape)} has rank #{tuple_size(x.shape)}"
    end

    if tuple_size(t.shape) != tuple_size(k.shape) do
      raise ArgumentError,
            "conv expects input and kernel of the same rank, got shapes " <>
              "#{inspect(t.shape)} and #{inspect(k.shape)}"
    end

    type = Type.to_floating(Type.merge(t.type, k.type))
    t = t |> Core.cast(type) |> permute(opts[:input_permutation], "input")
    k = k |> Core.cast(type) |> permute(opts[:kernel_permutation], "kernel")

    rank = tuple_size(t.shape)
    ns = rank - 2
    strides = spatial!(opts[:strides], ns, "strides")
    idil = spatial!(opts[:input_dilation], ns, "input dilation")
    kdil = spatial!(opts[:kernel_dilation], ns, "kernel dilation")
    fg = group!(opts[:feature_group_size], :feature_group_size)
    bg = group!(opts[:batch_group_size], :batch_group_size)

    [n, c | in_sp] = Tuple.to_list(t.shape)
    [o, kc | k_sp] = Tuple.to_list(k.shape)
    validate_groups!(t.shape, k.shape, n, c, o, kc, fg, bg)

    dilated_in =
      Enum.zip_with(in_sp, idil, fn d, id -> if d == 0, do: 0, else: (d - 1) * id + 1 end)

    dilated_k = Enum.zip_with(k_sp, kdil, fn kk, kd -> (kk - 1) * kd + 1 end)
    {low, high} = padding!(opts[:padding], ns, dilated_k)

    Enum.zip([dilated_in, dilated_k, low, high])
    |> Enum.each(fn {d, kk, lo, hi} ->
      if d + lo + hi < kk do
        raise ArgumentError,
              "conv would result in empty tensor which is not currently supported in Nx, " <>
                "please open an issue if you'd like this behavior to change"
      end
    end)

    out = Core.wrap(Native.conv(t.ref, k.ref, strides, low, high, idil, kdil, fg, bg))

    case opts[:output_permutation] do
      nil ->
        out

      perm ->
        perm = permutation!(perm, rank, "output")
        inverse = perm |> Enum.with_index() |> Enum.sort() |> Enum.map(&elem(&1, 1))

        if inverse == Enum.to_list(0..(rank - 1)),
          do: out,
          else: Core.wrap(Native.transpose(out.ref, inverse))
    end
  end

  defp permute(t, nil, _what), do: t

  defp permute(t, perm, what) do
    rank = tuple_size(t.shape)
    perm = permutation!(perm, rank, what)

    if perm == Enum.to_list(0..(rank - 1)),
      do: t,
      else: Core.wrap(Native.transpose(t.ref, perm))
  end

  defp permutation!(perm, rank, what) do
    unless is_list(perm) and Enum.sort(perm) == Enum.to_list(0..(rank - 1)) do
      raise ArgumentError,
            "#{what}_permutation must be a permutation of the #{rank} axes, got: #{inspect(perm)}"
    end

    perm
  end

  defp spatial!(n, ns, _what) when is_integer(n) and n >= 1, do: List.duplicate(n, ns)

  defp spatial!(list, ns, what) when is_list(list) do
    cond do
      length(list) != ns ->
        raise ArgumentError,
              "rank of #{what} much match rank of spatial dimensions, got #{what} " <>
                "#{inspect(list)} with rank #{length(list)} and #{ns} spatial dimensions"

      not Enum.all?(list, &(is_integer(&1) and &1 >= 1)) ->
        raise ArgumentError,
              "#{what} of each dimension must be a positive integer, got #{inspect(list)}"

      true ->
        list
    end
  end

  defp spatial!(other, _ns, what),
    do:
      raise(ArgumentError, "#{what} must be a positive integer or a list, got: #{inspect(other)}")

  defp group!(n, _name) when is_integer(n) and n >= 1, do: n

  defp group!(other, name),
    do:
      raise(ArgumentError, "#{inspect(name)} must be a positive integer, got: #{inspect(other)}")

  defp validate_groups!(in_shape, k_shape, n, c, o, kc, fg, bg) do
    cond do
      bg != 1 and fg != 1 ->
        raise ArgumentError,
              "either batch groups or feature groups must be 1," <>
                " got batch_groups = #{bg} and feature_groups = #{fg}"

      rem(n, bg) != 0 ->
        raise ArgumentError,
              "batch groups must evenly divide input batch size" <>
                " got rem(#{bg}, #{n}) != 0"

      rem(o, fg) != 0 ->
        raise ArgumentError,
              "size of kernel output channels must be evenly divisible by feature groups" <>
                " got rem(#{o}, #{fg}) != 0 for kernel with shape #{inspect(k_shape)}"

      rem(o, bg) != 0 ->
        raise ArgumentError,
              "size of kernel output channels must be evenly divisible by batch groups" <>
                " got rem(#{o}, #{bg}) != 0 for kernel with shape #{inspect(k_shape)}"

      c != kc * fg ->
        raise ArgumentError,
              "size of input channels divided by feature groups must match size of kernel channels," <>
                " got #{c} / #{fg} != #{kc} for shapes #{inspect(in_shape)} and #{inspect(k_shape)}"

      true ->
        :ok
    end
  end

  defp padding!(:valid, ns, _k), do: {List.duplicate(0, ns), List.duplicate(0, ns)}

  defp padding!(:same, _ns, dilated_k) do
    dilated_k
    |> Enum.map(fn k -> {div(k - 1, 2), k - 1 - div(k - 1, 2)} end)
    |> Enum.unzip()
  end

  defp padding!(config, ns, _k) when is_list(config) do
    unless length(config) == ns and
             Enum.all?(config, &match?({lo, hi} when is_integer(lo) and is_integer(hi), &1)) do
      raise ArgumentError,
            "invalid padding configuration, expected :valid, :same or one {low, high} " <>
              "integer pair per spatial axis (#{ns}), got: #{inspect(config)}"
    end

    Enum.unzip(config)
  end

  defp padding!(other, _ns, _k) do
    raise ArgumentError,
          "invalid padding mode specified, padding must be one of :valid, :same, " <>
            "or a padding configuration, got: #{inspect(other)}"
  end
end
