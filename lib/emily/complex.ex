defmodule Emily.Complex do
  @moduledoc """
  A complex number, as the values of c64/c128 tensors read back into Elixir
  (`to_number/1`, `to_list/1`) and as literals accepted by tensor functions.

  Nx uses the `Complex` library's struct for this; Hex is unavailable here,
  so Emily carries this minimal struct with the same field names
  (`re`, `im`). Parts are floats or `:nan`, `:infinity`, `:neg_infinity`.
  """
  defstruct re: 0.0, im: 0.0

  @type part :: float() | :nan | :infinity | :neg_infinity
  @type t :: %__MODULE__{re: part(), im: part()}

  @doc "Builds `re + im·i`."
  def new(re, im \\ 0.0), do: %__MODULE__{re: to_part(re), im: to_part(im)}

  defp to_part(x) when is_integer(x), do: x * 1.0
  defp to_part(x) when is_float(x) or x in [:nan, :infinity, :neg_infinity], do: x
end
