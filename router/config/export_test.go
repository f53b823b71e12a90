package config

import "reflect"

// DecodeWithDefaults is Parse without the environment and validation: the
// file read strictly, with the loader's defaults filled in.
func DecodeWithDefaults(name string, data []byte) (*Config, error) {
	c, err := decode(name, data)
	if err != nil {
		return nil, err
	}
	c.setDefaults()
	return c, nil
}

// YAMLFields maps the YAML keys of struct t to their field types, as the
// strict loader reads them.
func YAMLFields(t reflect.Type) map[string]reflect.Type { return yamlFields(t) }
