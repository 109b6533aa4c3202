module kvc.dev/kvc

go 1.19
