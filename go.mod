module github.com/sflowswitchd/sflowswitchd

go 1.26.8

require github.com/netsampler/goflow2/v2 v2.2.6

require github.com/stretchr/testify v1.12.1 // indirect
