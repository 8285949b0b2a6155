defmodule Emily.QuantizedWeight do
  @derive {Nx.Container,
           containers: [:value, :scales, :biases], keep: [:group_size, :bits, :transpose, :mode]}
  defstruct [:value, :scales, :biases, :group_size, :bits, :transpose, :mode]
end
