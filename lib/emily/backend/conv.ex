defmodule Emily.Backend.Conv do
  @moduledoc false
  # Nx.conv/3 on the engine's N-d cross-correlation. Nx has normalised the
  # options (padding pairs, per-axis strides and dilations, permutations)
  # and validated the shapes; the engine takes `{n, c, spatial...}` inputs
  # and `{o, c / groups, spatial...}` kernels of one type, so the
  # permutations become transposes around it.

  alias Emily.Backend.Util
  alias Emily.Native

  def conv(out, tensor, kernel, opts) do
    [t, k] = Util.refs([tensor, kernel])
    type = out.type
    t = t |> Util.cast(type) |> permute(opts[:input_permutation])
    k = k |> Util.cast(type) |> permute(opts[:kernel_permutation])
    {low, high} = Enum.unzip(opts[:padding])

    ref =
      Native.conv(
        t,
        k,
        opts[:strides],
        low,
        high,
        opts[:input_dilation],
        opts[:kernel_dilation],
        opts[:feature_group_size],
        opts[:batch_group_size]
      )

    # The engine's result is in `{n, o, spatial...}` order; Nx's
    # output_permutation says where each of those axes goes.
    ref =
      case opts[:output_permutation] do
        nil -> ref
        perm -> permute(ref, inverse(perm))
      end

    Util.wrap(out, ref, [tensor, kernel])
  end

  defp permute(ref, nil), do: ref

  defp permute(ref, perm) do
    if perm == Enum.to_list(0..(length(perm) - 1)), do: ref, else: Native.transpose(ref, perm)
  end

  defp inverse(perm), do: perm |> Enum.with_index() |> Enum.sort() |> Enum.map(&elem(&1, 1))
end
