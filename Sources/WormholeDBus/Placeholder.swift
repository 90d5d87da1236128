package let placeholder = 0
