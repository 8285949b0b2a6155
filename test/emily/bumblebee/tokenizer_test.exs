defmodule Emily.Bumblebee.TokenizerTest do
  # Bumblebee's tokenizer API on our pure-Elixir `tokenizers` (tokenizers/),
  # with the real all-MiniLM-L6-v2 tokenizer.json. Expected ids are what
  # Hugging Face's tokenizers (Python) returns for the same file. No model
  # is loaded: this takes well under a second.
  use ExUnit.Case, async: true

  @moduletag :bumblebee

  @tokenizer_json Path.expand("../../../tokenizers/test/golden/minilm/tokenizer.json", __DIR__)

  setup_all do
    dir =
      Path.join(System.tmp_dir!(), "emily_minilm_tokenizer_#{System.unique_integer([:positive])}")

    File.mkdir_p!(dir)
    File.cp!(@tokenizer_json, Path.join(dir, "tokenizer.json"))
    File.write!(Path.join(dir, "config.json"), ~s({"model_type": "bert"}))

    File.write!(
      Path.join(dir, "special_tokens_map.json"),
      ~s({"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"})
    )

    on_exit(fn -> File.rm_rf!(dir) end)
    {:ok, tokenizer} = Bumblebee.load_tokenizer({:local, dir})
    %{tokenizer: tokenizer}
  end

  @unicode "Tokenizers in pure Elixir: naïve café, 東京 🚀"
  @unicode_ids [101, 19204, 17629, 2015, 1999, 5760, 12005, 9048, 2099, 1024, 15743] ++
                 [7668, 1010, 1879, 1755, 100, 102]

  test "load_tokenizer reads the BERT tokenizer", %{tokenizer: tokenizer} do
    assert %Bumblebee.Text.PreTrainedTokenizer{type: :bert} = tokenizer
    assert Bumblebee.Tokenizer.token_to_id(tokenizer, "[CLS]") == 101
    assert Bumblebee.Tokenizer.id_to_token(tokenizer, 7592) == "hello"
  end

  test "apply_tokenizer pads a batch and returns masks and byte offsets", %{tokenizer: tokenizer} do
    tokenizer =
      Bumblebee.configure(tokenizer, return_special_tokens_mask: true, return_offsets: true)

    inputs = Bumblebee.apply_tokenizer(tokenizer, ["Hello world!", @unicode])

    hello = [101, 7592, 2088, 999, 102] ++ List.duplicate(0, 12)
    assert Nx.to_list(inputs["input_ids"]) == [hello, @unicode_ids]

    assert Nx.to_list(inputs["attention_mask"]) == [
             List.duplicate(1, 5) ++ List.duplicate(0, 12),
             List.duplicate(1, 17)
           ]

    assert Nx.to_list(inputs["token_type_ids"]) == List.duplicate(List.duplicate(0, 17), 2)

    assert Nx.to_list(inputs["special_tokens_mask"]) == [
             [1, 0, 0, 0, 1] ++ List.duplicate(1, 12),
             [1] ++ List.duplicate(0, 15) ++ [1]
           ]

    [starts, _] = Nx.to_list(inputs["start_offsets"])
    [stops, _] = Nx.to_list(inputs["end_offsets"])
    assert Enum.take(Enum.zip(starts, stops), 5) == [{0, 0}, {0, 5}, {6, 11}, {11, 12}, {0, 0}]

    # byte offsets: the text slices back with binary_part/3
    [_, starts] = Nx.to_list(inputs["start_offsets"])
    [_, stops] = Nx.to_list(inputs["end_offsets"])
    slices = for {s, e} <- Enum.zip(starts, stops), do: binary_part(@unicode, s, e - s)
    assert Enum.slice(slices, 10..15) == ["naïve", "café", ",", "東", "京", "🚀"]
  end

  test "pairs get type ids 0 and 1", %{tokenizer: tokenizer} do
    inputs =
      Bumblebee.apply_tokenizer(tokenizer, [{"What is Emily?", "An Elixir tensor library."}])

    assert Nx.to_list(inputs["input_ids"]) == [
             [101, 2054, 2003, 6253, 1029, 102, 2019, 12005, 9048, 2099, 23435, 3075, 1012, 102]
           ]

    assert Nx.to_list(inputs["token_type_ids"]) == [List.duplicate(0, 6) ++ List.duplicate(1, 8)]
  end

  test "length truncates before the special tokens are added", %{tokenizer: tokenizer} do
    inputs = Bumblebee.apply_tokenizer(Bumblebee.configure(tokenizer, length: 8), @unicode)
    assert Nx.to_list(inputs["input_ids"]) == [[101, 19204, 17629, 2015, 1999, 5760, 12005, 102]]

    tokenizer = Bumblebee.configure(tokenizer, length: 8, pad_direction: :left)
    inputs = Bumblebee.apply_tokenizer(tokenizer, "Hello world!")
    assert Nx.to_list(inputs["input_ids"]) == [[0, 0, 0, 101, 7592, 2088, 999, 102]]
  end

  test "decode skips special tokens", %{tokenizer: tokenizer} do
    assert Bumblebee.Tokenizer.decode(tokenizer, [101, 7592, 2088, 999, 102]) == "hello world!"
    assert Bumblebee.Tokenizer.decode(tokenizer, [[101, 7592, 102], [2088]]) == ["hello", "world"]
  end
end
