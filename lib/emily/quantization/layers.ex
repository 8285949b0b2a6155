defmodule Emily.Quantization.Layers do
  @moduledoc """
  Axon layer functions on quantized weights.

  `quantized_dense/4` is a drop-in for
  `Axon.Quantization.Layers.weight_only_quantized_dense/4` whose kernel is
  an `Emily.QuantizedWeight` (any bits and group size, either layout)
  instead of an `Axon.Quantization.QTensor`: the product runs through
  `Emily.Quantization.quantized_matmul/2` (the engine kernel on Emily, pure
  Nx elsewhere). `Emily.Quantization.Transform` rewrites a model's dense
  layers to it.
  """

  import Nx.Defn

  @doc """
  `input @ W + bias` with `W` the dense `[in, out]` kernel that `kernel`
  (an `Emily.QuantizedWeight`) quantizes. `input` is `{..., in}`, converted
  to the kernel's scales type when it differs (the result then has that
  type); `bias` is a tensor, a number, or omitted (then `opts` may take its
  place, as in Axon's layer).
  """
  deftransform quantized_dense(input, kernel, bias \\ 0, opts \\ []) do
    {bias, _opts} =
      case bias do
        %Nx.Tensor{} = bias -> {bias, opts}
        bias when is_number(bias) -> {bias, opts}
        opts when is_list(opts) -> {0, opts}
        other -> raise ArgumentError, "invalid bias, expected a tensor, got #{inspect(other)}"
      end

    %Emily.QuantizedWeight{scales: scales} = kernel
    input = Nx.as_type(input, scales.type)

    input
    |> Emily.Quantization.quantized_matmul(kernel)
    |> Nx.add(bias)
  end
end
