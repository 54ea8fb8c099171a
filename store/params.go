package store

// NamedParams lists the named parameters text uses (:name, @name or
// $name outside strings, quoted names and comments), lower-cased and
// without their sign, each once, in order of first use; a positional ?
// is "#n".
func NamedParams(text string) []string {
	_, params := numberParams(text)
	return params
}
