defmodule Emily.Quantization.QuantizedMatmul do
  @moduledoc false
  # The Nx.block/4 struct of Emily.Quantization.quantized_matmul/2; its
  # engine kernel (Emily.Block) runs under Emily.Backend and Emily.Compiler.
  @behaviour Emily.Block

  alias Emily.Backend.Util
  alias Emily.Native

  defstruct [:transpose, :group_size, :bits]

  @impl true
  def emily_block(%__MODULE__{} = s, out, [x, v, scales, biases]) do
    if tuple_size(v.shape) == 2 do
      [xr, vr, sr, br] = Util.refs([x, v, scales, biases])
      ref = Native.quantized_matmul(xr, vr, sr, br, s.transpose, s.group_size, s.bits)
      Util.wrap(out, Emily.check_finite(:quantized_matmul, ref), [x])
    else
      :fallback
    end
  end
end

defmodule Emily.Quantization.Dequantize do
  @moduledoc false
  # The Nx.block/4 struct of Emily.Quantization.dequantize/1.
  @behaviour Emily.Block

  alias Emily.Backend.Util
  alias Emily.Native

  defstruct [:group_size, :bits]

  @impl true
  def emily_block(%__MODULE__{} = s, out, [v, scales, biases]) do
    [vr, sr, br] = Util.refs([v, scales, biases])
    ref = Native.dequantize(vr, sr, br, s.group_size, s.bits, out.type)
    Util.wrap(out, Emily.check_finite(:dequantize, ref), [scales])
  end
end
