module github.com/hamba/avro/v2

go 1.24.0

require (
	github.com/ettle/strcase v0.2.0
	github.com/go-viper/mapstructure/v2 v2.4.0
	github.com/golang/snappy v1.0.0
	github.com/json-iterator/go v1.1.12
	github.com/klauspost/compress v1.18.2
	github.com/modern-go/reflect2 v1.0.2
	github.com/stretchr/testify v1.9.0
	golang.org/x/tools v0.40.0
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	golang.org/x/mod v0.31.0 // indirect
	golang.org/x/sync v0.19.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
