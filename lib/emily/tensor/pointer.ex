defmodule Emily.Tensor.Pointer do
  @moduledoc """
  A raw pointer to a tensor's bytes, as `Nx.Pointer`: what
  `Emily.Tensor.to_pointer/2` returns and `Emily.Tensor.from_pointer/5`
  takes.

    * `:kind` - `:local` (an address in this OS process); `:ipc` handles
      are not supported by Emily
    * `:address` - the address of the first byte
    * `:data_size` - the number of bytes
    * `:handle` - always `nil` (IPC handles only)

  `from_pointer/5` also accepts any map with these keys (an `Nx.Pointer`
  among them), but only addresses that `to_pointer/2` handed out in this
  VM and whose tensor is still alive.
  """

  @enforce_keys [:kind, :address, :data_size]
  defstruct [:kind, :address, :data_size, handle: nil]

  @type t :: %__MODULE__{
          kind: :local | :ipc,
          address: nil | non_neg_integer(),
          data_size: pos_integer(),
          handle: nil | binary()
        }
end
