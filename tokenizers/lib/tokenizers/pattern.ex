defmodule Tokenizers.Pattern do
  @moduledoc false
  # The `pattern` of Split pre-tokenizers and Replace normalizers/decoders:
  # a literal string or a regex. Hugging Face compiles regexes with
  # Oniguruma; Erlang's PCRE (`unicode` + `ucp`) reads the same syntax for
  # the patterns tokenizers use (\p{L}, \p{N}, lookahead, possessive and
  # case-insensitive groups).

  alias Tokenizers.Text

  def from_json(%{"String" => str}), do: {:string, str}
  def from_json(%{"Regex" => source}), do: {:regex, compile!(source)}

  def compile!(source) do
    case :re.compile(source, [:unicode, :ucp]) do
      {:ok, mp} -> mp
      {:error, reason} -> throw({:unsupported, "regex #{inspect(source)}: #{inspect(reason)}"})
    end
  end

  @doc "Segments of a text for a pattern."
  def find(text, {:string, str}), do: Text.find_string(text, str)
  def find(text, {:regex, mp}), do: Text.find_regex(text, mp)

  @doc "Replaces every occurrence in a plain string."
  def replace_in(bin, {:string, ""}, _content), do: bin
  def replace_in(bin, {:string, str}, content), do: :binary.replace(bin, str, content, [:global])

  def replace_in(bin, {:regex, mp}, content),
    do: :re.replace(bin, mp, escape(content), [:global, {:return, :binary}])

  defp escape(content), do: String.replace(content, ["\\", "&"], fn c -> "\\" <> c end)
end
